// Builds the package: copies the repository's protos into ./proto (shipped with the package, loaded at run time by
// @grpc/proto-loader), generates TypeScript types for them (proto-loader-gen-types, with the loader options the
// client uses), then compiles src/ and test/ to dist/. Nothing generated is committed.
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const repoProtos = join(root, "..", "..", "proto");
const protos = join(root, "proto");
const bin = (name) => join(root, "node_modules", ".bin", name);

// From a checkout the repository's protos are the truth; a packed copy of the package carries its own.
if (existsSync(join(repoProtos, "llm"))) {
  rmSync(protos, { recursive: true, force: true });
  cpSync(repoProtos, protos, { recursive: true });
}
if (!existsSync(join(protos, "llm"))) {
  throw new Error(`no protos in ${protos}: build from a checkout of the repository`);
}

const generated = join(root, "src", "generated");
rmSync(generated, { recursive: true, force: true });
// These options must match LOADER_OPTIONS in src/index.ts.
execFileSync(
  bin("proto-loader-gen-types"),
  [
    "--keepCase",
    "--longs=String",
    "--enums=String",
    "--defaults",
    "--oneofs",
    "--grpcLib=@grpc/grpc-js",
    `--outDir=${generated}`,
    "llm/sessions/v1/sessions.proto",
    "llm/gateway/v1/gateway.proto",
    "llm/gateway/v1/hooks.proto",
    "llm/gateway/v1/keys.proto",
    // Last: the option takes every argument after it.
    "--includeDirs",
    protos,
  ],
  { stdio: "inherit" },
);

rmSync(join(root, "dist"), { recursive: true, force: true });
execFileSync(bin("tsc"), ["-p", join(root, "tsconfig.json")], { stdio: "inherit" });
