"""What deploy/validate.py and deploy/validate_monitoring.py share: paths, the services' defaults, the error list,
and the Instance model (one deployed llm-gateway or session-processor)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
DOCKER = DEPLOY / "docker"
GATEWAY, PROCESSOR = "llm-gateway", "session-processor"
SECRETS_TEMPLATE = K8S / "base" / "secrets.example.yaml"
# The kustomizations that are deployments of the services (rendered by validate.sh with `kubectl kustomize`), and
# the one that holds the ServiceMonitors.
OVERLAYS = ("overlays/dev", "overlays/production")
MONITORING = "monitoring"
# The Helm chart (deploy/helm/llm-platform) rendered with its default values and with deploy/helm/tests/production.yaml.
HELM_RENDERS = ("helm/default", "helm/production")
# The configuration keys that name TLS files, by service.
TLS_KEYS = {
    GATEWAY: [("server", "tls", ("cert_file", "key_file", "client_ca_file"))],
    PROCESSOR: [("server", "tls", ("cert_file", "key_file", "client_ca_file")),
                ("gateway", "tls", ("ca_file", "cert_file", "key_file")),
                ("redis", "tls", ("ca_file", "cert_file", "key_file"))],
}
# What each binary does without a file or variable (config.rs defaults).
DEFAULTS = {
    GATEWAY: {"config_env": "GATEWAY_CONFIG", "listen_env": "GATEWAY_LISTEN", "listen": "127.0.0.1:50051",
              "tokens_env": "GATEWAY_AUTH_TOKENS", "grace_ms": 30000},
    PROCESSOR: {"config_env": "PROCESSOR_CONFIG", "listen_env": "PROCESSOR_LISTEN", "listen": "127.0.0.1:50052",
                "tokens_env": "PROCESSOR_AUTH_TOKENS", "grace_ms": 30000},
}
# Ports of third-party images used in compose.yaml, by image name without tag.
IMAGE_PORTS = {"redis": {6379}, "jaegertracing/all-in-one": {4317, 4318, 16686}}
# Value given to secret-backed variables when a configuration is checked with the real binary.
DUMMY_SECRET = "deploy-lint-dummy-token-0123456789"

errors: list[str] = []
warnings: list[str] = []


def fail(where: str, message: str) -> None:
    errors.append(f"{where}: {message}")


def warn(where: str, message: str) -> None:
    warnings.append(f"{where}: {message}")


def rel(p: Path) -> str:
    try:
        return str(p.relative_to(ROOT))
    except ValueError:
        return str(p)


@dataclass(frozen=True)
class SecretRef:
    name: str
    key: str
    optional: bool


@dataclass
class Instance:
    """One deployed llm-gateway or session-processor."""

    where: str
    service: str
    env: dict[str, object]  # value: str, or SecretRef, or None (set from a source we cannot see)
    config: dict | None = None  # parsed TOML, None = the binary's defaults
    config_text: str | None = None
    config_where: str = ""
    ports: set[int] | None = None  # ports the platform exposes for the container; None = not declared
    grace_seconds: float | None = None  # how long the platform waits after SIGTERM
    prestop_seconds: float = 0
    probe_ports: list[tuple[str, int]] = field(default_factory=list)
    tcp_probes: list[str] = field(default_factory=list)  # probes that are TCP connects rather than gRPC health
    named_ports: dict[str, int] = field(default_factory=dict)
    secret_mounts: dict[str, str] | None = None  # mountPath -> Secret name; None outside Kubernetes

    def tls_files(self) -> list[tuple[str, str]]:
        """(key, path) of every TLS file its configuration names."""
        out = []
        for table, sub, keys in TLS_KEYS[self.service]:
            tls = ((self.config or {}).get(table) or {}).get(sub) or {}
            out += [(f"{table}.{sub}.{k}", tls[k]) for k in keys if tls.get(k)]
        return out

    def serves_tls(self) -> bool:
        return bool(((self.config or {}).get("server") or {}).get("tls"))

    def value(self, name: str) -> str | None:
        v = self.env.get(name)
        return v if isinstance(v, str) and v != "" else None

    def is_set(self, name: str) -> bool:
        v = self.env.get(name)
        if isinstance(v, SecretRef):
            return True
        return v is not None and v != ""


