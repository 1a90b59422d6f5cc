"""The HTTP API and the web page (docs/http-api.md): ``create_app(settings)`` builds the app."""

from seasons.http.app import create_app

__all__ = ["create_app"]
