"""A Prometheus server's HTTP query API, the two calls kaisched makes of it
(instant and range queries), over urllib3 with orjson.

Any failure -- refused, timed out, an error status, an answer that is not
Prometheus's -- is one UsageDBError with what went wrong.
"""
from __future__ import annotations

from typing import Any

import orjson
import urllib3

from kaisched.errors import UsageDBError

Labels = dict[str, str]


class PrometheusClient:
    def __init__(self, url: str, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._http = urllib3.PoolManager(retries=False,
                                         timeout=urllib3.Timeout(total=timeout))

    def query(self, expr: str, at: float) -> list[tuple[Labels, float]]:
        """An instant query: each series' labels and value."""
        data = self._get("/api/v1/query", {"query": expr, "time": f"{at:.3f}"})
        if data.get("resultType") != "vector":
            raise UsageDBError(f"{expr}: expected a vector, got {data.get('resultType')!r}")
        try:
            return [(dict(r["metric"]), float(r["value"][1])) for r in data.get("result") or ()]
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise UsageDBError(f"{expr}: a sample that cannot be read: {exc!r}") from None

    def query_range(self, expr: str, start: float, end: float, step: float
                    ) -> list[tuple[Labels, list[tuple[float, float]]]]:
        """A range query: each series' labels and its (time, value) samples."""
        data = self._get("/api/v1/query_range", {"query": expr, "start": f"{start:.3f}",
                                                 "end": f"{end:.3f}", "step": f"{step:.3f}"})
        if data.get("resultType") != "matrix":
            raise UsageDBError(f"{expr}: expected a matrix, got {data.get('resultType')!r}")
        try:
            return [(dict(r["metric"]), [(float(t), float(v)) for t, v in r["values"]])
                    for r in data.get("result") or ()]
        except (KeyError, TypeError, ValueError) as exc:
            raise UsageDBError(f"{expr}: a sample that cannot be read: {exc!r}") from None

    def close(self) -> None:
        self._http.clear()

    def _get(self, path: str, fields: dict[str, str]) -> dict[str, Any]:
        try:
            response = self._http.request("GET", self.url + path, fields=fields)
        except urllib3.exceptions.HTTPError as exc:
            raise UsageDBError(f"Prometheus at {self.url} did not answer: "
                               f"{exc.__class__.__name__}: {exc}") from None
        try:
            body = orjson.loads(response.data)
        except orjson.JSONDecodeError:
            raise UsageDBError(f"Prometheus at {self.url}: HTTP {response.status}, "
                               "not a JSON answer") from None
        if response.status != 200 or not isinstance(body, dict) or body.get("status") != "success":
            error = body.get("error") if isinstance(body, dict) else None
            raise UsageDBError(f"Prometheus at {self.url}: HTTP {response.status}: "
                               f"{error or 'no result'}")
        data = body.get("data")
        if not isinstance(data, dict):
            raise UsageDBError(f"Prometheus at {self.url}: an answer without data")
        return data
