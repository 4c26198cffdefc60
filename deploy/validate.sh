#!/usr/bin/env bash
# Validates everything under deploy/ (`make deploy-lint`, part of `make test`):
#
#  1. every kustomization under deploy/k8s rendered with `kubectl kustomize` (kubectl's built-in kustomize; the
#     machine image ships kubectl), and the rendered overlays (overlays/dev, overlays/production) plus the Secret
#     template validated against the API schemas of pinned Kubernetes versions, in strict mode (unknown fields are
#     errors), with kubernetes-validate. The ServiceMonitors (k8s/monitoring, a CRD kubernetes-validate has no
#     schema for) and the Grafana dashboard are checked by validate_monitoring.py;
#  2. deploy/compose.yaml against the Compose specification's JSON schema (check-jsonschema's bundled copy);
#  3. the cross-file rules in deploy/validate.py: every environment variable that compose.yaml, the Kubernetes
#     manifests and the Dockerfiles give llm-gateway or session-processor is one the binary reads (the table below),
#     required variables are set, listen ports agree with container ports, probes, Services and EXPOSE, grace
#     periods cover shutdown_grace_ms, Secret/ConfigMap references resolve, TLS files are keys of mounted Secrets,
#     every kustomization lists every manifest beside it, and the Dockerfiles build binaries that exist;
#  4. every llm-gateway and session-processor configuration the deployments use, with exactly their environment,
#     through the real binaries' `--check` (every key and value, as a start would validate them; skipped when cargo
#     is missing, or with DEPLOY_LINT_NO_CARGO=1).
#
# The Python tools are pinned and installed on first use into .tools/deploy-venv (pip, from PyPI).
set -euo pipefail
cd "$(dirname "$0")/.."

# Kubernetes versions the manifests must be valid for: the oldest supported (the preStop `sleep` action is on by
# default from 1.30) and the newest the pinned kubernetes-validate knows.
K8S_VERSIONS=(1.30.0 1.37.0)
# helm-python-sdk: Helm's Go SDK (v4) behind a C ABI, the only way to run Helm's template engine from these
# registries (no helm binary is packaged on PyPI, npm, Debian or crates.io); deploy/helm/render.py uses it.
PY_TOOLS=(kubernetes-validate==1.37.0 check-jsonschema==0.39.0 PyYAML==6.0.3 helm-python-sdk==0.2.2
          'tomli==2.2.1; python_version < "3.11"')

# ---------------------------------------------------------------------------------------------------------------
# The environment variables each binary reads, derived by hand from the code, one per line:
#
#   <reader>  <variable>  <status>  <evidence file or directory>  <evidence literal (rest of the line)>
#
# status `read`: read today; the evidence literal must still appear in the evidence file (or in a .rs file under
# the directory), so a renamed variable or a moved reader makes this check fail instead of leaving the table stale.
# status `pending`: given to a service ahead of the code that will read it; allowed with a warning while the
# evidence is missing, and like `read` once it appears (then mark it `read`).
#
# <reader> is llm-gateway, session-processor, or llm-telemetry: the crate both services start their logging and
# tracing with (shared/telemetry). The variable `@llm-telemetry` means "every llm-telemetry variable": the
# evidence is the service calling it. The OpenTelemetry SDK behind it reads the standard OTEL_* variables; the
# table lists the ones worth setting (the exporter starts only when OTEL_EXPORTER_OTLP_ENDPOINT is set; the service
# name is fixed in code, so OTEL_SERVICE_NAME is read but overridden; add attributes with OTEL_RESOURCE_ATTRIBUTES).
#
# Besides these, a binary reads the variables its configuration file names: providers.<id>.api_key_env and
# base_url_env for llm-gateway, gateway.token_env and redis.password_env for session-processor. validate.py takes those from the file each
# deployment mounts. The session-processor image also ships the `sessions` CLI, whose PROCESSOR_ADDR and
# PROCESSOR_TOKEN are therefore allowed there.
read_by_binaries() {
  cat <<'EOF'
llm-gateway        GATEWAY_CONFIG               read     services/llm-gateway/src/main.rs                    env = "GATEWAY_CONFIG"
llm-gateway        GATEWAY_LISTEN               read     services/llm-gateway/src/config.rs                  "GATEWAY_LISTEN"
llm-gateway        GATEWAY_METRICS_LISTEN       read     services/llm-gateway/src/config.rs                  "GATEWAY_METRICS_LISTEN"
llm-gateway        GATEWAY_HTTP_LISTEN          read     services/llm-gateway/src/config.rs                  "GATEWAY_HTTP_LISTEN"
llm-gateway        GATEWAY_AUTH_TOKENS          read     services/llm-gateway/src/keys/file.rs               "GATEWAY_AUTH_TOKENS"
llm-gateway        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT read services/llm-gateway/src/config.rs  env.var("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
llm-gateway        OPENAI_API_KEY               read     services/llm-gateway/src/config.rs                  "OPENAI_API_KEY"
llm-gateway        OPENAI_BASE_URL              read     services/llm-gateway/src/config.rs                  "OPENAI_BASE_URL"
llm-gateway        ANTHROPIC_API_KEY            read     services/llm-gateway/src/config.rs                  "ANTHROPIC_API_KEY"
llm-gateway        ANTHROPIC_BASE_URL           read     services/llm-gateway/src/config.rs                  "ANTHROPIC_BASE_URL"
llm-gateway        GEMINI_API_KEY               read     services/llm-gateway/src/config.rs                  "GEMINI_API_KEY"
llm-gateway        GEMINI_BASE_URL              read     services/llm-gateway/src/config.rs                  "GEMINI_BASE_URL"
llm-gateway        GATEWAY_TLS_CERT_FILE        read     services/llm-gateway/src/config.rs                  "GATEWAY",
llm-gateway        GATEWAY_TLS_KEY_FILE         read     services/llm-gateway/src/config.rs                  "GATEWAY",
llm-gateway        GATEWAY_TLS_CLIENT_CA_FILE   read     services/llm-gateway/src/config.rs                  "GATEWAY",
llm-gateway        @llm-telemetry               read     services/llm-gateway/src/main.rs                    llm_telemetry::init(
session-processor  PROCESSOR_CONFIG             read     services/session-processor/src/main.rs              env = "PROCESSOR_CONFIG"
session-processor  PROCESSOR_LISTEN             read     services/session-processor/src/config.rs            "PROCESSOR_LISTEN"
session-processor  PROCESSOR_METRICS_LISTEN     read     services/session-processor/src/config.rs            "PROCESSOR_METRICS_LISTEN"
session-processor  PROCESSOR_AUTH_TOKENS        read     services/session-processor/src/config.rs            "PROCESSOR_AUTH_TOKENS"
session-processor  PROCESSOR_OPERATOR_TOKENS    read     services/session-processor/src/config.rs            "PROCESSOR_OPERATOR_TOKENS"
session-processor  GATEWAY_URL                  read     services/session-processor/src/config.rs            env.var("GATEWAY_URL")
session-processor  REDIS_URL                    read     services/session-processor/src/config.rs            env.var("REDIS_URL")
session-processor  REDIS_MODE                   read     shared/redis-kit/src/settings.rs                    var("REDIS_MODE")
session-processor  REDIS_SENTINEL_MASTER        read     shared/redis-kit/src/settings.rs                    var("REDIS_SENTINEL_MASTER")
session-processor  REDIS_PASSWORD               read     services/session-processor/src/config.rs            password_env: "REDIS_PASSWORD".into(),
session-processor  PROCESSOR_TLS_CERT_FILE      read     services/session-processor/src/config/transport.rs  "PROCESSOR", |name|
session-processor  PROCESSOR_TLS_KEY_FILE       read     services/session-processor/src/config/transport.rs  "PROCESSOR", |name|
session-processor  PROCESSOR_TLS_CLIENT_CA_FILE read     services/session-processor/src/config/transport.rs  "PROCESSOR", |name|
session-processor  PROCESSOR_WORKSPACE_ROOT     read     services/session-processor/src/config.rs            "PROCESSOR_WORKSPACE_ROOT"
session-processor  PROCESSOR_SNAPSHOT_ROOT      read     services/session-processor/src/config.rs            .var("PROCESSOR_SNAPSHOT_ROOT")
session-processor  GATEWAY_BALANCE              read     services/session-processor/src/config.rs            .var("GATEWAY_BALANCE")
session-processor  @llm-telemetry               read     services/session-processor/src/main.rs              llm_telemetry::init(
session-processor  PROCESSOR_ADDR               read     services/session-processor/src/bin/sessions_cli/main.rs  env = "PROCESSOR_ADDR"
session-processor  PROCESSOR_TOKEN              read     services/session-processor/src/bin/sessions_cli/main.rs  env = "PROCESSOR_TOKEN"
llm-telemetry      RUST_LOG                     read     shared/telemetry/src/lib.rs                         EnvFilter::try_from_default_env()
llm-telemetry      LOG_FORMAT                   read     shared/telemetry/src/lib.rs                         std::env::var("LOG_FORMAT")
llm-telemetry      OTEL_EXPORTER_OTLP_ENDPOINT  read     shared/telemetry/src/lib.rs                         var_os("OTEL_EXPORTER_OTLP_ENDPOINT")
llm-telemetry      OTEL_EXPORTER_OTLP_HEADERS   read     shared/telemetry/src/lib.rs                         SpanExporter::builder()
llm-telemetry      OTEL_EXPORTER_OTLP_TIMEOUT   read     shared/telemetry/src/lib.rs                         SpanExporter::builder()
llm-telemetry      OTEL_SERVICE_NAME            read     shared/telemetry/src/lib.rs                         EnvResourceDetector::new()
llm-telemetry      OTEL_RESOURCE_ATTRIBUTES     read     shared/telemetry/src/lib.rs                         EnvResourceDetector::new()
llm-telemetry      OTEL_TRACES_SAMPLER          read     shared/telemetry/src/lib.rs                         SdkTracerProvider::builder()
llm-telemetry      OTEL_TRACES_SAMPLER_ARG      read     shared/telemetry/src/lib.rs                         SdkTracerProvider::builder()
llm-telemetry      OTEL_BSP_SCHEDULE_DELAY      read     shared/telemetry/src/lib.rs                         with_batch_exporter
EOF
}
# ---------------------------------------------------------------------------------------------------------------

venv=.tools/deploy-venv
if ! "$venv/bin/python" -c "import kubernetes_validate, check_jsonschema, yaml, helm_python" 2>/dev/null \
   || ! "$venv/bin/python" -m pip freeze 2>/dev/null | grep -qx "${PY_TOOLS[0]}"; then
  echo "deploy-lint: installing ${PY_TOOLS[*]} into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet "${PY_TOOLS[@]}"
fi
py="$venv/bin/python"

# kubectl's built-in kustomize renders the overlays; `patches:` needs kustomize v4 or later (kubectl 1.21+; Debian's
# kubernetes-client 1.20 is too old). The machine image ships kubectl with kustomize v5.
kustomize_version=$(kubectl version --client 2>/dev/null | sed -n 's/^Kustomize Version: v\([0-9]*\).*/\1/p')
if [ -z "$kustomize_version" ] || [ "$kustomize_version" -lt 4 ]; then
  echo "deploy-lint: kubectl with kustomize v4 or later is needed to render deploy/k8s (kubectl kustomize)" >&2
  exit 1
fi
rendered_dir=$(mktemp -d)
trap 'rm -rf "$rendered_dir"' EXIT
rendered_args=()
for k in base overlays/dev overlays/production monitoring; do
  out="$rendered_dir/${k//\//-}.yaml"
  echo "deploy-lint: kubectl kustomize deploy/k8s/$k"
  kubectl kustomize "deploy/k8s/$k" >"$out"
  [ "$k" = base ] || rendered_args+=(--rendered "$k=$out")
  [ "$k" = monitoring ] && continue
  for v in "${K8S_VERSIONS[@]}"; do
    echo "deploy-lint: kubernetes-validate --strict -k $v (deploy/k8s/$k rendered)"
    "$venv/bin/kubernetes-validate" --strict --quiet -k "$v" "$out"
  done
done
# The Helm chart, rendered and linted (strict) by Helm's engine, with its defaults and with production-like values.
for values in - deploy/helm/tests/production.yaml; do
  label=helm/default; [ "$values" = - ] || label=helm/production
  out="$rendered_dir/${label//\//-}.yaml"
  "$py" deploy/helm/render.py "$values" "$out" "$out.core"
  rendered_args+=(--rendered "$label=$out")
  for v in "${K8S_VERSIONS[@]}"; do
    echo "deploy-lint: kubernetes-validate --strict -k $v ($label rendered)"
    "$venv/bin/kubernetes-validate" --strict --quiet -k "$v" "$out.core"
  done
done
for v in "${K8S_VERSIONS[@]}"; do
  echo "deploy-lint: kubernetes-validate --strict -k $v (deploy/k8s/base/secrets.example.yaml)"
  "$venv/bin/kubernetes-validate" --strict --quiet -k "$v" deploy/k8s/base/secrets.example.yaml
done

echo "deploy-lint: compose.yaml against the Compose specification"
"$venv/bin/check-jsonschema" --builtin-schema vendor.compose-spec deploy/compose.yaml

check_bins=()
if [ -z "${DEPLOY_LINT_NO_CARGO:-}" ] && command -v cargo >/dev/null 2>&1; then
  echo "deploy-lint: building llm-gateway and session-processor for --check"
  cargo build --quiet --locked -p llm-gateway --bin llm-gateway -p session-processor --bin session-processor
  check_bins=(--gateway-bin "${CARGO_TARGET_DIR:-target}/debug/llm-gateway"
              --processor-bin "${CARGO_TARGET_DIR:-target}/debug/session-processor")
else
  echo "deploy-lint: skipping --check of the configurations (no cargo, or DEPLOY_LINT_NO_CARGO set)"
fi

"$py" deploy/validate.py --env-table <(read_by_binaries) "${rendered_args[@]}" "${check_bins[@]}"
