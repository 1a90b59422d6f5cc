"""Seasons next to other leaderboard libraries: ``python -m bench.peers [--quick]``.

Four ways to keep a leaderboard on the same local ``redis-server``, fed the same events and
asked the same questions, one after the other with a FLUSHALL between them:

- **Seasons** (in-process): ``submit_many`` in batches, which writes the day, week and season
  boards (write-through) and the member data in one Lua call per batch; ``top``, ``around``,
  ``rank`` on the day board.
- **redis-rank** (npm, driven by ``redis_rank_bench.mjs`` under Node): a daily
  ``PeriodicLeaderboard`` with the ``aggregate`` update policy.
- **leaderboard** (PyPI ``ninchanese-leaderboard``, the maintained fork of ``leaderboard``, in
  its own virtual environment, driven by ``pyleaderboard_bench.py``).
- **pipeline** (in-process): hand-written redis-py, the same keys and work as Seasons.

``workload`` makes the events and the answers they must give, ``inprocess`` runs Seasons and
the pipeline, ``external`` installs and runs the other two in ``bench/peers/scratch/`` (git-
ignored), ``report`` prints the table.
"""
