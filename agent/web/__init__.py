"""The observer's live web page: the plan tree as it grows, competing splits side by side with
their scores and votes, claims on a timeline, results, peers, downloads, a submit form, and a
person as one more voter. See docs/web.md."""

from .server import serve_web

__all__ = ["serve_web"]
