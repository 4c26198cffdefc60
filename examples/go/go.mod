// The module is named `llm` so the generated packages keep the import paths the protos declare (go_package
// "llm/sessions/v1;sessionsv1"): ./generate.sh writes them to ./sessions/v1 and ./gateway/v1. In your own module,
// map them to your import path instead with protoc's M option or buf's managed mode (see ../README.md).
module llm

go 1.19

require (
	google.golang.org/grpc v1.33.3
	google.golang.org/protobuf v1.28.1
)
