"""Seasons configuration: settings classes, loading and validation."""

from seasons.config.loading import ConfigError, load_settings
from seasons.config.settings import BoardSettings, SeasonSpan, Settings

__all__ = ["BoardSettings", "ConfigError", "SeasonSpan", "Settings", "load_settings"]
