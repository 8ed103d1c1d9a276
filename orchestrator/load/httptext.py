"""What the load client says about an answer that is not a stream of the API: an HTTP error's text (its JSON
message when it has one) and a 200 answer that is a web page (a login form, a proxy's page)."""

from __future__ import annotations

import json

__all__: list[str] = []

#: Media types of a page for a person (a login form, a proxy's error page), never of an API's answer.
_PAGE_TYPES = ("text/html", "application/xhtml+xml")
_PAGE_SHOWN = 120  # characters of such a page's beginning kept in the error


def _is_page(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() in _PAGE_TYPES


def _page_text(content_type: str, body: bytes) -> str:
    """What a 200 answer that is a web page is: the content type and its first characters, on one line."""
    head = " ".join(body[: _PAGE_SHOWN * 4].decode("utf-8", "replace").split())
    head = "".join(ch if ch.isprintable() else "?" for ch in head)[:_PAGE_SHOWN]
    return (
        f"not an OpenAI-compatible answer: HTTP 200 with Content-Type {content_type.strip()!r} (a web page, such as "
        f"a login or a proxy's page, not the server's API); it begins {head!r}"
    )


def _http_error_text(status: int, body: bytes) -> str:
    text = body.decode("utf-8", "replace").strip()
    try:
        payload = json.loads(text)
    except ValueError:
        return f"HTTP {status}: {text[:200]}" if text else f"HTTP {status}"
    if isinstance(payload, dict):
        error = payload.get("error", payload)
        if isinstance(error, dict):
            error = error.get("message") or error.get("detail") or text[:200]
        return f"HTTP {status}: {error}"
    return f"HTTP {status}: {text[:200]}"
