"""Checks of the monitoring files, run by deploy/validate.py: the ServiceMonitors (deploy/k8s/monitoring) against
the Services every overlay renders, and the Grafana dashboard (deploy/grafana/llm-platform.json): its structure,
unique panel ids, the datasource variable every panel and query uses, the variables queries name, and the `job`
labels (which the Prometheus operator sets to the scraped Service's name).

That every metric a query names is one the services export is checked against real scrapes of both binaries by
tests/tests/metrics_e2e.rs (part of `make test`), not here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from validate_common import DEPLOY, fail, rel

DASHBOARD = DEPLOY / "grafana" / "llm-platform.json"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
PANEL_TYPES = {"row", "timeseries", "stat", "gauge", "bargauge", "table", "heatmap", "text"}
BUILTIN_VARS = {"__rate_interval", "__interval", "__range", "__interval_ms", "__range_s"}
DURATION = re.compile(r"^\d+(ms|s|m|h)$")
SERVICE_MONITOR_KEYS = {
    "metadata": {"name", "labels", "namespace", "annotations"},
    "spec": {"selector", "endpoints", "namespaceSelector", "jobLabel"},
    "endpoint": {"port", "path", "scheme", "interval", "scrapeTimeout", "honorLabels"},
}


def seconds(text: str) -> float:
    n, unit = re.match(r"(\d+)(ms|s|m|h)", text).groups()
    return int(n) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]


def check_servicemonitors(docs: list[dict], services: dict[str, dict[str, dict]]) -> set[str]:
    """`services`: overlay -> its Services by name. Returns the names of the Services scraped (the `job` values)."""
    jobs = set()
    if not docs:
        fail("k8s/monitoring", "no ServiceMonitor")
    for d in docs:
        where = f"k8s/monitoring {d.get('kind')}/{(d.get('metadata') or {}).get('name')}"
        if d.get("apiVersion") != "monitoring.coreos.com/v1" or d.get("kind") != "ServiceMonitor":
            fail(where, "only monitoring.coreos.com/v1 ServiceMonitors belong here")
            continue
        for part, keys in (("metadata", d["metadata"]), ("spec", d.get("spec") or {})):
            for k in set(keys) - SERVICE_MONITOR_KEYS[part]:
                fail(where, f"unknown field {part}.{k}")
        spec = d.get("spec") or {}
        match = (spec.get("selector") or {}).get("matchLabels") or {}
        endpoints = spec.get("endpoints") or []
        if not match:
            fail(where, "spec.selector.matchLabels is empty (it would select every Service)")
        if not endpoints:
            fail(where, "no endpoints")
        for ep in endpoints:
            for k in set(ep) - SERVICE_MONITOR_KEYS["endpoint"]:
                fail(where, f"unknown endpoint field {k}")
            if not isinstance(ep.get("port"), str):
                fail(where, "endpoint.port must name a Service port")
            if not str(ep.get("path", "/metrics")).startswith("/"):
                fail(where, f"endpoint.path {ep.get('path')} must start with /")
            if ep.get("scheme", "http") not in ("http", "https"):
                fail(where, f"endpoint.scheme {ep.get('scheme')}")
            for k in ("interval", "scrapeTimeout"):
                if k in ep and not DURATION.match(str(ep[k])):
                    fail(where, f"endpoint.{k} {ep[k]} is not a duration")
            if DURATION.match(str(ep.get("interval", ""))) and DURATION.match(str(ep.get("scrapeTimeout", ""))) \
                    and seconds(ep["scrapeTimeout"]) > seconds(ep["interval"]):
                fail(where, "scrapeTimeout is longer than interval")
            for overlay, svcs in services.items():
                scraped = [name for name, s in svcs.items()
                           if all((s["metadata"].get("labels") or {}).get(k) == v for k, v in match.items())
                           and any(p.get("name") == ep.get("port") for p in s["spec"].get("ports") or [])]
                if not scraped:
                    fail(where, f"in {overlay} no Service with labels {match} has a port named {ep.get('port')}")
                # The Prometheus operator's job label: the Service's label named by jobLabel, else its name.
                label = spec.get("jobLabel")
                jobs |= {(svcs[n]["metadata"].get("labels") or {}).get(label, n) if label else n for n in scraped}
    return jobs


def check_dashboard(jobs: set[str], path: Path = DASHBOARD) -> None:
    where = rel(path)
    try:
        dash = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        fail(where, f"not readable JSON: {e}")
        return
    for key, kind in (("uid", str), ("title", str), ("schemaVersion", int), ("panels", list), ("templating", dict)):
        if not isinstance(dash.get(key), kind):
            fail(where, f"`{key}` must be a {kind.__name__}")
    if not isinstance(dash.get("panels"), list) or not isinstance(dash.get("templating"), dict):
        return
    variables = {v.get("name"): v for v in dash["templating"].get("list") or []}
    ds = variables.get("datasource") or {}
    if ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        fail(where, "needs a `datasource` variable of type datasource, query prometheus")
    for name, v in variables.items():
        if v.get("type") == "query" and v.get("datasource") != DATASOURCE:
            fail(where, f"variable {name} must query {DATASOURCE}")
    ids: set[int] = set()
    for p in dash["panels"]:
        pw = f"{where} panel {p.get('id')} {p.get('title')!r}"
        if not isinstance(p.get("id"), int) or p["id"] in ids:
            fail(pw, "panel ids must be unique integers")
        ids.add(p.get("id"))
        if p.get("type") not in PANEL_TYPES:
            fail(pw, f"unknown panel type {p.get('type')}")
        g = p.get("gridPos") or {}
        if not all(isinstance(g.get(k), int) for k in "hwxy") or g.get("x", 0) + g.get("w", 0) > 24:
            fail(pw, f"gridPos {g} must have integer h, w, x, y within 24 columns")
        if p.get("type") == "row":
            continue
        if not p.get("title"):
            fail(pw, "no title")
        if p.get("datasource") != DATASOURCE:
            fail(pw, f"datasource must be {DATASOURCE}")
        targets = p.get("targets") or []
        if not targets:
            fail(pw, "no queries")
        if len({t.get("refId") for t in targets}) != len(targets):
            fail(pw, "refIds must be unique within a panel")
        for t in targets:
            check_query(f"{pw} {t.get('refId')}", t, variables, jobs)


def check_query(where: str, target: dict, variables: dict, jobs: set[str]) -> None:
    expr = target.get("expr") or ""
    if target.get("datasource") != DATASOURCE:
        fail(where, f"datasource must be {DATASOURCE}")
    if not expr.strip():
        fail(where, "empty expr")
        return
    depth = {"(": 0, "[": 0, "{": 0}
    for ch in re.sub(r'"[^"]*"', '""', expr):
        for o, c in ("()", "[]", "{}"):
            depth[o] += (ch == o) - (ch == c)
            if depth[o] < 0:
                fail(where, f"unbalanced {c} in {expr}")
                return
    if any(depth.values()):
        fail(where, f"unbalanced brackets in {expr}")
    for var in re.findall(r"\$\{?(\w+)", expr):
        if var not in variables and var not in BUILTIN_VARS:
            fail(where, f"names ${var}, which is not a dashboard variable")
    for job in re.findall(r'job\s*=\s*"([^"]*)"', expr):
        if job not in jobs:
            fail(where, f'job="{job}" is not a Service a ServiceMonitor scrapes ({sorted(jobs)})')
    if "job=" not in expr.replace(" ", ""):
        fail(where, "every query selects its service by job (both services export the gen_ai_* metrics)")
