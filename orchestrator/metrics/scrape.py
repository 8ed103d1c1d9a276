"""GETs on a server's control plane: ``/metrics`` scrapes, engine information, and gauges sampled through a point.

One httpx client serves every GET of the process (httpx's clients are thread-safe): building one costs tens of
milliseconds (its TLS context), which a client per call paid twice per point, and once a second while sampling.
"""

from __future__ import annotations

import threading

import httpx

from orchestrator.engines.controlplane import request

__all__ = ["GaugeSampler", "get", "scrape"]

_client: httpx.Client | None = None
_client_lock = threading.Lock()


def get(url: str, path: str, api_key: str | None) -> tuple[int | None, str | None]:
    """``(status, body)`` of one GET on the control plane; ``(None, None)`` when the server did not answer."""
    global _client
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    with _client_lock:
        if _client is None:
            _client = httpx.Client(timeout=5.0, trust_env=False)
        client = _client
    answer = request(client, "GET", url + path, headers=headers)  # a total deadline and a size cap
    return answer.status, answer.text


def scrape(url: str, path: str | None, api_key: str | None) -> str | None:
    """The text at ``url + path`` (a Prometheus exposition), or None: no path, no answer, or not a 200."""
    if not path:
        return None
    status, text = get(url, path, api_key)
    return text if status == 200 else None


class GaugeSampler:
    """Scrapes ``/metrics`` about once a second while a point runs, so gauges are sampled through the window."""

    def __init__(self, url: str, path: str | None, api_key: str | None, interval: float = 1.0) -> None:
        self._args = (url, path, api_key)
        self._interval = interval
        self._done = threading.Event()
        self._texts: list[str] = []
        self._thread = threading.Thread(target=self._run, name="metrics-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(self._interval):
            text = scrape(*self._args)
            if text is not None:
                self._texts.append(text)

    def finish(self) -> list[str]:
        """Stop sampling; the texts scraped so far, in order."""
        self._done.set()
        self._thread.join(timeout=6.0)
        return list(self._texts)
