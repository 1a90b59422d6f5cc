"""The HTTP API and the web page (docs/http-api.md): ``seasons.http.app.create_app(settings)``
builds the app. Nothing is imported here, so that a module of the package imports another
(``from seasons.http import boards``) without loading the app that imports them all."""
