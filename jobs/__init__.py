"""The long-lived worker: scheduled rollups, closes, archives, sweep and heartbeat."""
