#!/usr/bin/env python3
"""Cross-file checks of deploy/: compose.yaml, the Kubernetes manifests and the Dockerfiles against each other and
against what the binaries read. Run by deploy/validate.sh, which holds the tables (--env-table, --processor-keys) and
explains the rules; this file only applies them.

A deployment of llm-gateway or session-processor is an *instance*: its environment, the configuration file it
mounts (or the one baked into its image), and the ports, probes and grace periods around it. Every instance is
checked the same way, wherever it comes from.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path, PurePosixPath

import yaml

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11; validate.sh installs tomli there
    import tomli as tomllib

import validate_monitoring
from validate_docker import check_cargo_chef, dockerfile_final_stage, workspace_packages
from validate_common import (
    DEFAULTS, DEPLOY, DOCKER, DUMMY_SECRET, GATEWAY, HELM_RENDERS, IMAGE_PORTS, K8S, MONITORING, OVERLAYS,
    PROCESSOR, ROOT,
    SECRETS_TEMPLATE, Instance, SecretRef, errors, fail, rel, warn, warnings,
)

# ----- the tables from validate.sh -----------------------------------------------------------------------------


def evidence_found(evidence: str, literal: str) -> bool:
    path = ROOT / evidence
    if path.is_dir():
        return any(literal in f.read_text(errors="replace") for f in path.rglob("*.rs"))
    return path.is_file() and literal in path.read_text(errors="replace")


def load_env_table(path: str) -> dict[str, dict[str, str]]:
    """binary -> {variable: "read" | "pending"}, with `@<reader>` rows expanded to that reader's variables."""
    table: dict[str, dict[str, str]] = {}
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 4)
        if len(parts) != 5:
            fail("validate.sh env table", f"malformed line: {line}")
            continue
        service, var, status, evidence, literal = parts
        found = evidence_found(evidence, literal)
        if status == "read":
            if not found:
                fail("validate.sh env table",
                     f"{service} {var}: `{literal}` no longer appears in {evidence}; update the table")
            table.setdefault(service, {})[var] = "read"
        elif status == "pending":
            table.setdefault(service, {})[var] = "read" if found else "pending"
        else:
            fail("validate.sh env table", f"{service} {var}: status must be read or pending, not {status}")
    for service, names in table.items():
        for var, status in list(names.items()):
            if var.startswith("@"):
                del names[var]
                for inherited, inherited_status in table.get(var[1:], {}).items():
                    names.setdefault(inherited, "pending" if "pending" in (status, inherited_status) else "read")
    return table


# ----- helpers -------------------------------------------------------------------------------------------------


def parse_addr(text: str) -> tuple[str, int] | None:
    m = re.fullmatch(r"\[?([^\]]*?)\]?:(\d+)", text.strip())
    return (m.group(1), int(m.group(2))) if m else None


def parse_url(text: str) -> tuple[str, str, int | None] | None:
    m = re.fullmatch(r"([a-z][a-z0-9+.-]*)://(?:[^@/]*@)?(\[[^\]]+\]|[^:/?#]+)(?::(\d+))?(?:[/?#].*)?", text.strip())
    if not m:
        return None
    return m.group(1), m.group(2).strip("[]"), int(m.group(3)) if m.group(3) else None


DEFAULT_PORTS = {"http": 80, "https": 443, "redis": 6379, "rediss": 6379}


def parse_duration(text: str) -> float | None:
    total, pos = 0.0, 0
    for m in re.finditer(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)", text):
        if m.start() != pos:
            return None
        total += float(m.group(1)) * {"h": 3600, "m": 60, "s": 1, "ms": 0.001, "us": 1e-6}[m.group(2)]
        pos = m.end()
    return total if pos == len(text) and text else None


def load_yaml_docs(path: Path) -> list[dict]:
    try:
        return [d for d in yaml.safe_load_all(path.read_text()) if d]
    except yaml.YAMLError as e:
        fail(rel(path), f"not valid YAML: {e}")
        return []


def parse_toml(text: str, where: str) -> dict | None:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        fail(where, f"not valid TOML: {e}")
        return None


COMPOSE_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def interpolate(value: object) -> object:
    """Compose interpolation with every variable unset: `${X:-d}` -> d, `${X}` -> ''."""
    if not isinstance(value, str):
        return value

    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        op, default = m.group(2), m.group(3) or ""
        return default if op in (":-", "-") else ""

    return COMPOSE_VAR.sub(sub, value)


# ----- the instances -------------------------------------------------------------------------------------------


def config_from_file(inst: Instance, path: Path) -> None:
    if not path.is_file():
        fail(inst.where, f"configuration file {rel(path)} does not exist")
        return
    inst.config_text = path.read_text()
    inst.config_where = rel(path)
    inst.config = parse_toml(inst.config_text, inst.config_where)


def baked_config(service: str) -> tuple[str, Path] | None:
    """The configuration path an image sets (ENV <X>_CONFIG) and the file it copies there, from its Dockerfile."""
    df = dockerfile_final_stage(DOCKER / f"{service}.Dockerfile")
    if df is None:
        return None
    path = df["env"].get(DEFAULTS[service]["config_env"])
    for src, dst in df["copies"]:
        if path and dst == path:
            return path, ROOT / src
    return None


def compose_instances(compose: dict) -> tuple[list[Instance], dict[str, set[int]]]:
    services = compose.get("services") or {}
    instances, service_ports = [], {}
    for name, svc in services.items():
        image = str(svc.get("image", "")).split("@")[0]
        image_name = image.rsplit(":", 1)[0] if ":" in image.split("/")[-1] else image
        service_ports[name] = set(IMAGE_PORTS.get(image_name, set()))
        cmd = svc.get("command") or []
        if isinstance(cmd, list) and "--listen" in cmd:
            addr = parse_addr(str(cmd[cmd.index("--listen") + 1]))
            if addr:
                service_ports[name].add(addr[1])
    for name, svc in services.items():
        if name not in DEFAULTS:
            continue
        where = f"compose.yaml services.{name}"
        raw_env = svc.get("environment") or {}
        if isinstance(raw_env, list):
            raw_env = dict(item.split("=", 1) if "=" in item else (item, None) for item in raw_env)
        env = {k: (None if v is None else str(interpolate(v))) for k, v in raw_env.items()}
        if svc.get("env_file"):
            fail(where, "env_file hides variables from this check; list them under environment")
        published = set()
        for p in svc.get("ports") or []:
            spec = str(p).split("/")[0]
            published.add(int(spec.rsplit(":", 1)[-1]))
        # Other containers reach every port; what is published must include the listen port.
        inst = Instance(where, name, env, ports=published or None)
        grace = svc.get("stop_grace_period")
        inst.grace_seconds = parse_duration(str(grace)) if grace else 10.0
        config_path = inst.value(DEFAULTS[name]["config_env"])
        baked = baked_config(name)
        if config_path is None and baked:
            config_path = baked[0]
        if config_path:
            source = None
            for v in svc.get("volumes") or []:
                parts = str(v).split(":") if isinstance(v, str) else [v.get("source"), v.get("target")]
                if len(parts) >= 2 and parts[1] == config_path:
                    source = DEPLOY / parts[0]
            if source is not None:
                config_from_file(inst, source)
            elif baked and baked[0] == config_path:
                config_from_file(inst, baked[1])
            else:
                fail(where, f"{DEFAULTS[name]['config_env']}={config_path} is neither mounted nor in the image")
        instances.append(inst)
        addr = effective_listen(inst)
        if addr:
            service_ports[name].add(addr[1])
    return instances, service_ports


def k8s_instances(label: str, objs: list[dict]) -> list[Instance]:
    configmaps = {d["metadata"]["name"]: d for d in objs if d.get("kind") == "ConfigMap"}
    instances = []
    for d in objs:
        if d.get("kind") not in ("Deployment", "StatefulSet"):
            continue
        pod = d["spec"]["template"]["spec"]
        for c in pod.get("containers", []):
            if c["name"] not in DEFAULTS:
                continue
            service = c["name"]
            where = f"{label} {d['kind']}/{d['metadata']['name']} container {service}"
            env: dict[str, object] = {}
            for e in c.get("env") or []:
                if "value" in e:
                    env[e["name"]] = str(e["value"])
                elif "secretKeyRef" in (e.get("valueFrom") or {}):
                    ref = e["valueFrom"]["secretKeyRef"]
                    env[e["name"]] = SecretRef(ref["name"], ref["key"], bool(ref.get("optional")))
                else:
                    env[e["name"]] = None
            if c.get("envFrom"):
                fail(where, "envFrom hides variable names from this check; list each variable under env")
            ports = {p["containerPort"] for p in c.get("ports") or []}
            inst = Instance(where, service, env, ports=ports)
            inst.named_ports = {p["name"]: p["containerPort"] for p in c.get("ports") or [] if "name" in p}
            inst.grace_seconds = float(pod.get("terminationGracePeriodSeconds", 30))
            pre = ((c.get("lifecycle") or {}).get("preStop") or {})
            inst.prestop_seconds = float((pre.get("sleep") or {}).get("seconds", 0))
            for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
                probe = c.get(kind) or {}
                if "grpc" in probe:
                    inst.probe_ports.append((kind, int(probe["grpc"]["port"])))
                elif "tcpSocket" in probe:
                    port = probe["tcpSocket"]["port"]
                    inst.probe_ports.append((kind, inst.named_ports.get(port, -1) if isinstance(port, str) else port))
                    inst.tcp_probes.append(kind)
                elif kind != "startupProbe":
                    fail(where, f"{kind} should be a grpc probe (the services serve grpc.health.v1 without a token), "
                                f"or tcpSocket on a TLS port")
            config_path = inst.value(DEFAULTS[service]["config_env"])
            if config_path is None:
                fail(where, f"set {DEFAULTS[service]['config_env']} to the mounted configuration file")
            else:
                mounts = {m["name"]: m["mountPath"] for m in c.get("volumeMounts") or []}
                volumes = {v["name"]: v for v in pod.get("volumes") or []}
                inst.secret_mounts = {mpath.rstrip("/"): volumes[v]["secret"]["secretName"]
                                      for v, mpath in mounts.items() if "secret" in volumes.get(v, {})}
                found = False
                for vname, mpath in mounts.items():
                    cm_name = (volumes.get(vname, {}).get("configMap") or {}).get("name")
                    if cm_name and str(PurePosixPath(config_path).parent) == mpath.rstrip("/"):
                        key = PurePosixPath(config_path).name
                        data = (configmaps.get(cm_name) or {}).get("data") or {}
                        if key not in data:
                            fail(where, f"ConfigMap {cm_name} has no key {key} for {config_path}")
                        else:
                            inst.config_text = data[key]
                            inst.config_where = f"{label} ConfigMap/{cm_name} {key}"
                            inst.config = parse_toml(inst.config_text, inst.config_where)
                        found = True
                if not found:
                    fail(where, f"{config_path} is not on a mounted ConfigMap")
            instances.append(inst)
    return instances


def dockerfile_instances() -> list[Instance]:
    instances = []
    for service in DEFAULTS:
        path = DOCKER / f"{service}.Dockerfile"
        final = dockerfile_final_stage(path)
        if final is None:
            fail(rel(path), "missing")
            continue
        inst = Instance(f"{rel(path)} (image defaults)", service, dict(final["env"]), ports=set(final["expose"]))
        baked = baked_config(service)
        if baked:
            config_from_file(inst, baked[1])
        instances.append(inst)
    return instances


# ----- the checks ----------------------------------------------------------------------------------------------


def config_env_names(inst: Instance) -> tuple[set[str], set[str]]:
    """Variables named by the configuration file itself: (required, optional)."""
    required, optional = set(), set()
    cfg = inst.config or {}
    if inst.service == GATEWAY:
        for p in (cfg.get("providers") or {}).values():
            if p.get("api_key_env"):
                required.add(p["api_key_env"])  # "set but missing is an error" (config.rs)
            if p.get("base_url_env"):
                optional.add(p["base_url_env"])
    else:
        # Without it the processor calls the gateway without a token, and every step fails UNAUTHENTICATED.
        required.add((cfg.get("gateway") or {}).get("token_env", "GATEWAY_TOKEN"))
        # Read when set (the password of redis.username, or of the default user).
        optional.add((cfg.get("redis") or {}).get("password_env", "REDIS_PASSWORD"))
    return required, optional


def effective_listen(inst: Instance) -> tuple[str, int] | None:
    d = DEFAULTS[inst.service]
    text = inst.value(d["listen_env"]) or ((inst.config or {}).get("server") or {}).get("listen") or d["listen"]
    addr = parse_addr(text)
    if addr is None:
        fail(inst.where, f"listen address `{text}` is not host:port")
    return addr


def check_instance(inst: Instance, table: dict[str, dict[str, str]]) -> None:
    d = DEFAULTS[inst.service]
    known = table.get(inst.service, {})
    required, optional = config_env_names(inst)
    from_config = required | optional
    for name in inst.env:
        if name in from_config:
            continue
        status = known.get(name)
        if status is None:
            fail(inst.where, f"sets {name}, which {inst.service} does not read (validate.sh lists what it reads)")
        elif status == "pending":
            warn(inst.where, f"sets {name}, which {inst.service} does not read yet (pending in validate.sh)")

    cfg = inst.config or {}
    server = cfg.get("server") or {}
    is_image = "(image defaults)" in inst.where
    tenant_tokens = any(t.get("tokens") for t in (cfg.get("tenants") or {}).values())
    if not is_image and not inst.is_set(d["tokens_env"]) and not server.get("auth_tokens") \
            and not server.get("allow_unauthenticated") and not tenant_tokens:
        fail(inst.where, f"no caller tokens: set {d['tokens_env']}")
    for name in sorted(required):
        if is_image:
            continue
        ref = inst.env.get(name)
        if ref is None or ref == "":
            fail(inst.where, f"{inst.config_where or 'the default configuration'} needs {name}, which is not set")
        elif isinstance(ref, SecretRef) and ref.optional:
            fail(inst.where, f"{name} comes from an optional Secret key, but the configuration needs it")

    addr = effective_listen(inst)
    if addr:
        host, port = addr
        if host in ("127.0.0.1", "localhost", "::1"):
            fail(inst.where, f"listens on {host}:{port}, unreachable from outside the container; "
                             f"set {d['listen_env']} or server.listen to 0.0.0.0:{port}")
        if inst.ports is not None and port not in inst.ports:
            fail(inst.where, f"listens on port {port}, which is not among its ports {sorted(inst.ports)}")
        if inst.named_ports and inst.named_ports.get("grpc") != port:
            fail(inst.where, f"container port `grpc` is {inst.named_ports.get('grpc')}, the server listens on {port}")
        for kind, probe_port in inst.probe_ports:
            if probe_port != port:
                fail(inst.where, f"{kind} probes port {probe_port}, the server listens on {port}")

    if inst.service == GATEWAY:
        metrics = inst.value("GATEWAY_METRICS_LISTEN") or server.get("metrics_listen")
        if metrics:
            maddr = parse_addr(metrics)
            if maddr is None:
                fail(inst.where, f"metrics address `{metrics}` is not host:port")
            elif inst.named_ports and inst.named_ports.get("metrics") != maddr[1]:
                fail(inst.where, f"metrics listen on {maddr[1]} but container port `metrics` is "
                                 f"{inst.named_ports.get('metrics')}")
            elif inst.ports is not None and maddr[1] not in inst.ports:
                fail(inst.where, f"metrics listen on {maddr[1]}, which is not among its ports {sorted(inst.ports)}")

    grace_ms = server.get("shutdown_grace_ms", d["grace_ms"])
    if inst.grace_seconds is not None:
        needed = inst.prestop_seconds + grace_ms / 1000
        if inst.grace_seconds < needed + (1 if inst.prestop_seconds else 0):
            fail(inst.where, f"waits {inst.grace_seconds:g} s after SIGTERM, less than preStop "
                             f"{inst.prestop_seconds:g} s + shutdown_grace_ms {grace_ms} (+ margin)")


def processor_urls(inst: Instance) -> list[tuple[str, str]]:
    cfg = inst.config or {}
    urls = []
    gw = inst.value("GATEWAY_URL") or (cfg.get("gateway") or {}).get("url") or "http://127.0.0.1:50051"
    urls.append(("gateway URL", gw))
    redis_env = inst.env.get("REDIS_URL")
    if isinstance(redis_env, str) and redis_env:
        urls.append(("REDIS_URL", redis_env))
    elif isinstance(redis_env, SecretRef) and not redis_env.optional:
        pass  # always replaced by the Secret's value, which this check cannot see
    else:
        urls.append(("redis.url", (cfg.get("redis") or {}).get("url") or "redis://127.0.0.1:6379"))
    return urls


def check_urls(inst: Instance, urls: list[tuple[str, str]], ports_by_host: dict[str, set[int]], scope: str) -> None:
    own = parse_addr(inst.value(DEFAULTS[inst.service]["listen_env"])
                     or ((inst.config or {}).get("server") or {}).get("listen") or DEFAULTS[inst.service]["listen"])
    for what, url in urls:
        parsed = parse_url(url)
        if parsed is None:
            fail(inst.where, f"{what} `{url}` is not a URL")
            continue
        scheme, host, port = parsed
        port = port or DEFAULT_PORTS.get(scheme)
        if host in ("127.0.0.1", "localhost", "::1"):
            # Fine for a client in the same container talking to this server (the `sessions` CLI), nothing else.
            if own is None or port != own[1]:
                fail(inst.where, f"{what} `{url}` points at the container itself")
        elif host in ports_by_host:
            if port not in ports_by_host[host]:
                fail(inst.where, f"{what} `{url}`: {scope} {host} has no port {port} "
                                 f"(it has {sorted(ports_by_host[host])})")
        elif "." not in host:
            fail(inst.where, f"{what} `{url}`: no {scope} named {host}")


def check_compose(table) -> list[Instance]:
    path = DEPLOY / "compose.yaml"
    docs = load_yaml_docs(path)
    if not docs:
        fail(rel(path), "empty")
        return []
    compose = docs[0]
    instances, service_ports = compose_instances(compose)
    for inst in instances:
        check_instance(inst, table)
        urls = [(k, v) for k, v in inst.env.items() if isinstance(v, str) and "://" in v]
        if inst.service == PROCESSOR:
            urls = [(k, v) for k, v in urls if k not in ("GATEWAY_URL", "REDIS_URL")] + processor_urls(inst)
        check_urls(inst, urls, service_ports, "compose service")
    for name, svc in (compose.get("services") or {}).items():
        build = svc.get("build")
        if isinstance(build, dict):
            ctx = (DEPLOY / build.get("context", ".")).resolve()
            dockerfile = ctx / build.get("dockerfile", "Dockerfile")
            if not dockerfile.is_file():
                fail(f"compose.yaml services.{name}", f"build.dockerfile {rel(dockerfile)} does not exist")
            if ctx != ROOT:
                fail(f"compose.yaml services.{name}", "build.context must be the repository root (..)")
        for dep in svc.get("depends_on") or {}:
            if dep not in compose["services"]:
                fail(f"compose.yaml services.{name}", f"depends_on unknown service {dep}")
    return instances


def check_kustomizations() -> None:
    """Every manifest under deploy/k8s is used: listed as a resource or patch of its directory's kustomization
    (the Secret template excepted, which must not be), and everything listed exists."""
    for kpath in sorted(K8S.rglob("kustomization.yaml")):
        where = rel(kpath)
        kust = (load_yaml_docs(kpath) or [{}])[0]
        listed = set()
        for r in kust.get("resources") or []:
            listed.add(r)
            if not (kpath.parent / r).exists():
                fail(where, f"resource {r} does not exist")
        for patch in kust.get("patches") or []:
            if "path" in patch:
                listed.add(patch["path"])
                if not (kpath.parent / patch["path"]).is_file():
                    fail(where, f"patch {patch['path']} does not exist")
        for path in sorted(kpath.parent.glob("*.yaml")):
            if path.name == "kustomization.yaml":
                continue
            if path == SECRETS_TEMPLATE:
                if path.name in listed:
                    fail(where, "must not list the Secret template (placeholders only)")
            elif path.name not in listed:
                fail(where, f"does not list {path.name}")


def load_rendered(path: str) -> list[dict]:
    return load_yaml_docs(Path(path))


def check_k8s(table, label: str, objs: list[dict]) -> tuple[list[Instance], dict[str, dict]]:
    """One rendered overlay (`kubectl kustomize` output): references, ports, probes, Secrets, TLS files and every
    instance of the services in it. Returns its instances and its Services by name."""
    template = load_yaml_docs(SECRETS_TEMPLATE) if SECRETS_TEMPLATE.is_file() else []
    secrets = {d["metadata"]["name"]: d for d in template if d.get("kind") == "Secret"}
    template_text = SECRETS_TEMPLATE.read_text() if SECRETS_TEMPLATE.is_file() else ""
    live = objs
    for d in live:
        if d.get("kind") == "Secret":
            fail(f"{label} Secret/{d['metadata']['name']}",
                 "Secrets belong in base/secrets.example.yaml (template) and out of the applied manifests")
    by_kind: dict[str, dict[str, dict]] = {}
    for d in live:
        by_kind.setdefault(d["kind"], {})[d["metadata"]["name"]] = d

    workloads = {**by_kind.get("Deployment", {}), **by_kind.get("StatefulSet", {})}

    def selects(selector: dict) -> list[dict]:
        return [w for w in workloads.values()
                if selector and all(w["spec"]["template"]["metadata"].get("labels", {}).get(k) == v
                                    for k, v in selector.items())]

    service_ports: dict[str, set[int]] = {}
    for name, svc in by_kind.get("Service", {}).items():
        selector = svc["spec"].get("selector") or {}
        targets = selects(selector)
        if not targets:
            fail(f"{label} Service/{name}", f"selector {selector} matches no Deployment or StatefulSet")
        service_ports[name] = {p["port"] for p in svc["spec"].get("ports") or []}
        for p in svc["spec"].get("ports") or []:
            tp = p.get("targetPort", p["port"])
            for w in targets:
                cports = [cp for c in w["spec"]["template"]["spec"]["containers"] for cp in c.get("ports") or []]
                if not any(cp.get("name") == tp or cp["containerPort"] == tp for cp in cports):
                    fail(f"{label} Service/{name}", f"targetPort {tp} is not a port of {w['metadata']['name']}")
    for name, w in workloads.items():
        if w["kind"] == "StatefulSet" and w["spec"].get("serviceName") not in service_ports:
            fail(f"{label} StatefulSet/{name}", f"serviceName {w['spec'].get('serviceName')} is not a Service")
        pod = w["spec"]["template"]["spec"]
        for v in pod.get("volumes") or []:
            cm = (v.get("configMap") or {}).get("name")
            if cm and cm not in by_kind.get("ConfigMap", {}):
                fail(f"{label} {w['kind']}/{name}", f"volume {v['name']} uses ConfigMap {cm}, which no manifest defines")
            secret = (v.get("secret") or {}).get("secretName")
            if secret and secret not in secrets:
                fail(f"{label} {w['kind']}/{name}", f"volume {v['name']} uses Secret {secret}, which "
                                                     f"base/secrets.example.yaml does not describe")
        for c in pod["containers"]:
            image = c["image"].split("@")[0]
            tag = image.rsplit(":", 1)[1] if ":" in image.split("/")[-1] else None
            if c["name"] in DEFAULTS and tag in (None, "latest"):
                fail(f"{label} {w['kind']}/{name}", f"image {c['image']} has no pinned tag (set one under images:)")
            for e in c.get("env") or []:
                ref = (e.get("valueFrom") or {}).get("secretKeyRef")
                if not ref:
                    continue
                secret = secrets.get(ref["name"])
                where = f"{label} {w['kind']}/{name} env {e['name']}"
                if secret is None:
                    fail(where, f"Secret {ref['name']} is not in secrets.example.yaml")
                elif ref["key"] not in (secret.get("stringData") or {}) | (secret.get("data") or {}):
                    mentioned = re.search(rf"^\s*#\s*{re.escape(ref['key'])}:.*required in[^\n]*{re.escape(label)}",
                                          template_text, re.M | re.I)
                    if not ref.get("optional") and not mentioned:
                        fail(where, f"required key {ref['key']} is missing from Secret {ref['name']} in the template "
                                    f"(or a `# {ref['key']}: ... required in {label}` line for a key only it needs)")
                    elif not re.search(rf"^\s*#\s*{re.escape(ref['key'])}:", template_text, re.M):
                        fail(where, f"optional key {ref['key']} is not even mentioned in secrets.example.yaml")
    for kind in ("HorizontalPodAutoscaler",):
        for name, h in by_kind.get(kind, {}).items():
            target = h["spec"]["scaleTargetRef"]
            if target["name"] not in by_kind.get(target["kind"], {}):
                fail(f"{label} {kind}/{name}", f"scaleTargetRef {target['kind']}/{target['name']} does not exist")
            elif "replicas" in by_kind[target["kind"]][target["name"]]["spec"]:
                warn(f"{label} {kind}/{name}", f"{target['name']} sets spec.replicas; every apply resets the HPA's count")
    for name, pdb in by_kind.get("PodDisruptionBudget", {}).items():
        if not selects(pdb["spec"]["selector"].get("matchLabels") or {}):
            fail(f"{label} PodDisruptionBudget/{name}", "selector matches no workload")

    instances = k8s_instances(label, live)
    for inst in instances:
        check_instance(inst, table)
        check_tls(inst, secrets, template_text)
        urls = [(k, v) for k, v in inst.env.items() if isinstance(v, str) and "://" in v]
        if inst.service == PROCESSOR:
            urls += processor_urls(inst)
        check_urls(inst, urls, service_ports, "Service")
    return instances, by_kind.get("Service", {})


def check_tls(inst: Instance, secrets: dict[str, dict], template_text: str) -> None:
    """Every TLS file the configuration names is a key of a Secret mounted where it points; a TLS listener is probed
    with TCP connects (Kubernetes' gRPC probe speaks plaintext only), a plaintext one with gRPC health."""
    for key, path in inst.tls_files():
        mount = str(PurePosixPath(path).parent)
        secret = (inst.secret_mounts or {}).get(mount)
        if secret is None:
            fail(inst.where, f"{key} = {path}: no Secret is mounted at {mount}")
            continue
        doc = secrets.get(secret) or {}
        name = PurePosixPath(path).name
        if name not in (doc.get("stringData") or {}) | (doc.get("data") or {}) \
                and not re.search(rf"^\s*#\s*{re.escape(name)}:", template_text, re.M):
            fail(inst.where, f"{key} = {path}: Secret {secret} has no key {name} in base/secrets.example.yaml")
    if inst.serves_tls():
        grpc = [k for k, _ in inst.probe_ports if k not in inst.tcp_probes]
        if grpc:
            fail(inst.where, f"serves TLS, but {', '.join(grpc)} use gRPC probes, which cannot speak TLS: use tcpSocket")
    elif inst.tcp_probes:
        fail(inst.where, f"{', '.join(inst.tcp_probes)} only connect; a plaintext server should be probed with gRPC health")


def check_dockerfiles(table) -> list[Instance]:
    packages = workspace_packages()
    for path in sorted(DOCKER.glob("*.Dockerfile")):
        final = dockerfile_final_stage(path)
        if final is None:
            fail(rel(path), "no stages")
            continue
        for src, _ in final["copies"]:
            if not (ROOT / src).exists():
                fail(rel(path), f"COPY source {src} does not exist")
        for run in final["all_runs"]:
            for m in re.finditer(r"cargo build[^&;]*", run):
                cmd = m.group(0)
                pkg = re.search(r"-p\s+(\S+)", cmd)
                if "--locked" not in cmd:
                    fail(rel(path), f"`{cmd.strip()}` should pass --locked")
                if pkg is None or pkg.group(1) not in packages:
                    fail(rel(path), f"`{cmd.strip()}`: no workspace package {pkg.group(1) if pkg else '(none)'}")
                    continue
                for b in re.findall(r"--bin\s+(\S+)", cmd):
                    if b not in packages[pkg.group(1)]:
                        fail(rel(path), f"package {pkg.group(1)} has no binary {b}")
        check_cargo_chef(path, final["all_runs"])
    instances = dockerfile_instances()
    for inst in instances:
        check_instance(inst, table)
    return instances


# Dummy values of Secret keys that must look like what they hold (the rest get DUMMY_SECRET).
DUMMY_VALUES = {
    "REDIS_URL": "redis://deploy-lint-dummy:6379",
    "GATEWAY_URL": "http://deploy-lint-dummy:50051",
}

# What `--check` needs where an image runs with its defaults (the deployment supplies these at run time).
IMAGE_DEFAULTS = {
    GATEWAY: {"GATEWAY_AUTH_TOKENS": DUMMY_SECRET},
    PROCESSOR: {"PROCESSOR_AUTH_TOKENS": DUMMY_SECRET, "GATEWAY_TOKEN": DUMMY_SECRET},
}


def with_test_certs(inst: Instance, tmp: Path) -> str:
    """The instance's configuration text with every TLS file's directory replaced by `tmp`, where a CA, a
    certificate for both services' names and its key are generated (tls.crt, tls.key, ca.crt, as the Secrets have
    them), so `--check` reads real files of the names the deployment uses."""
    text = inst.config_text or ""
    files = inst.tls_files()
    if not files:
        return text
    names = {PurePosixPath(path).name for _, path in files}
    if not names <= {"tls.crt", "tls.key", "ca.crt"}:
        fail(inst.where, f"TLS files {sorted(names)}: this check generates tls.crt, tls.key and ca.crt only")
        return text

    def openssl(*argv: str) -> None:
        subprocess.run(["openssl", *argv], check=True, capture_output=True, cwd=tmp, timeout=60)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    openssl("req", "-x509", *ec, "-days", "1", "-subj", "/CN=deploy-lint CA", "-keyout", "ca.key", "-out", "ca.crt")
    openssl("req", *ec, "-subj", "/CN=deploy-lint", "-keyout", "tls.key", "-out", "tls.csr")
    (tmp / "ext").write_text("subjectAltName=DNS:llm-gateway,DNS:llm-gateway-headless,DNS:session-processor\n"
                             "extendedKeyUsage=serverAuth,clientAuth\n")
    openssl("x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-days", "1",
            "-extfile", "ext", "-out", "tls.crt")
    for _, path in files:
        text = text.replace(path, str(tmp / PurePosixPath(path).name))
    return text


def binary_check(service: str, binary: Path, instances: list[Instance]) -> None:
    """Runs `<service> --check` (llm-gateway or session-processor: the binary's own validation, every key and value)
    on every configuration of that service with the instance's own environment: once with the optional Secret keys
    absent and, when there are some, once with all of them present (dummy values)."""
    for inst in instances:
        if inst.service != service:
            continue
        optional = [n for n, v in inst.env.items() if isinstance(v, SecretRef) and v.optional]
        for with_optional in ([False, True] if optional else [False]):
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
            for name, v in inst.env.items():
                if isinstance(v, SecretRef):
                    if with_optional or not v.optional:
                        env[name] = DUMMY_VALUES.get(name, DUMMY_SECRET)
                elif isinstance(v, str):
                    env[name] = v
            if "(image defaults)" in inst.where:
                for name, value in IMAGE_DEFAULTS[service].items():
                    env.setdefault(name, value)
            # --config below names the same file, copied out of its manifest.
            env.pop("GATEWAY_CONFIG", None)
            env.pop("PROCESSOR_CONFIG", None)
            # Tracing does not affect the configuration; leaving it out keeps --check from dialling a collector.
            env = {k: v for k, v in env.items() if not k.startswith("OTEL_")}
            with tempfile.TemporaryDirectory() as tmp:
                cfg = Path(tmp) / "config.toml"
                cfg.write_text(with_test_certs(inst, Path(tmp)))
                r = subprocess.run([str(binary), "--check", "--config", str(cfg)], env=env, capture_output=True,
                                   text=True, timeout=60)
            out = (r.stderr + r.stdout).strip().splitlines()
            what = inst.where + (" with every optional Secret key" if with_optional else "")
            if r.returncode != 0:
                fail(what, f"{service} --check refuses {inst.config_where or 'the defaults'}: "
                           f"{out[-1] if out else r.returncode}")
            else:
                print(f"deploy-lint: {service} --check {what}: {out[-1] if out else 'ok'}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--env-table", required=True)
    ap.add_argument("--gateway-bin")
    ap.add_argument("--processor-bin")
    ap.add_argument("--rendered", action="append", default=[], metavar="DIR=FILE",
                    help="`kubectl kustomize deploy/k8s/DIR` output, for every overlay and for monitoring")
    args = ap.parse_args()
    table = load_env_table(args.env_table)
    rendered = dict(r.split("=", 1) for r in args.rendered)
    instances = []
    instances += check_compose(table)
    check_kustomizations()
    services, jobs = {}, set()
    for label in OVERLAYS + HELM_RENDERS:
        if label not in rendered:
            fail("validate.sh", f"{label} was not rendered")
            continue
        docs = load_rendered(rendered[label])
        monitors = [d for d in docs if str(d.get("apiVersion", "")).startswith("monitoring.coreos.com/")]
        found, services[label] = check_k8s(table, label, [d for d in docs if d not in monitors])
        instances += found
        if monitors:
            jobs |= validate_monitoring.check_servicemonitors(monitors, {label: services[label]})
    if MONITORING not in rendered:
        fail("validate.sh", f"k8s/{MONITORING} was not rendered")
    kustomized = {k: v for k, v in services.items() if k in OVERLAYS}
    jobs |= validate_monitoring.check_servicemonitors(load_rendered(rendered.get(MONITORING, "/dev/null")), kustomized)
    validate_monitoring.check_dashboard(jobs)
    instances += check_dockerfiles(table)
    for service in DEFAULTS:
        if not any(i.service == service for i in instances):
            fail("deploy", f"no deployment of {service} found")
    if args.gateway_bin:
        binary_check(GATEWAY, Path(args.gateway_bin), instances)
    if args.processor_bin:
        binary_check(PROCESSOR, Path(args.processor_bin), instances)
    for w in warnings:
        print(f"deploy-lint: warning: {w}")
    for e in errors:
        print(f"deploy-lint: error: {e}", file=sys.stderr)
    print(f"deploy-lint: {len(instances)} deployments of the services checked, "
          f"{len(errors)} errors, {len(warnings)} warnings")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
