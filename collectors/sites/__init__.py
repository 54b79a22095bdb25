"""Local web applications for the web domain's tests, examples and demo, served by `serve_sites`."""

from collectors.sites.server import SITES_PLACEHOLDER, SitesServer, serve_sites, shared_sites_url

__all__ = ["SITES_PLACEHOLDER", "SitesServer", "serve_sites", "shared_sites_url"]
