"""Seasons configuration: settings classes, loading and validation."""

from config.loading import ConfigError, load_settings
from config.settings import BoardSettings, SeasonSpan, Settings

__all__ = ["BoardSettings", "ConfigError", "SeasonSpan", "Settings", "load_settings"]
