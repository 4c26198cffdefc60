// Conversation creates a session, sends a prompt offering a client tool, answers the tool call and prints the
// conversation, with the Go code generated from the protos (./generate.sh) and google.golang.org/grpc.
//
//	make up && source .tools/up/env      # PROCESSOR_ADDR, PROCESSOR_TOKEN, DEMO_MODEL
//	cd examples/go && ./generate.sh && go mod tidy && go run ./cmd/conversation
//
// Without a running stack's environment it talks to 127.0.0.1:50152 (`make up`'s processor) with the model
// `demo/scripted` (the demo provider); PROCESSOR_TOKEN is always needed. Exits non-zero when the conversation did
// not end as a completed answer.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	sessionsv1 "llm/sessions/v1"
)

const getTimeSchema = `{"type":"object","properties":{"timezone":{"type":"string"}},"required":["timezone"]}`

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "conversation:", err)
		os.Exit(1)
	}
}

func env(key, fallback string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return fallback
}

// getTime is the client tool: it runs here, in the caller's process, never on the processor.
func getTime(inputJSON string) (output string, isError bool) {
	var input struct {
		Timezone string `json:"timezone"`
	}
	if err := json.Unmarshal([]byte(inputJSON), &input); err != nil || input.Timezone != "UTC" {
		return "only UTC is known here", true
	}
	return time.Now().UTC().Format("15:04:05") + " UTC", false
}

func run() error {
	token := os.Getenv("PROCESSOR_TOKEN")
	if token == "" {
		return errors.New("PROCESSOR_TOKEN is not set (make up prints it)")
	}
	addr := strings.TrimPrefix(env("PROCESSOR_ADDR", "127.0.0.1:50152"), "http://")
	model := env("DEMO_MODEL", "demo/scripted")

	// The client settings of docs/operations.md: a 32 MiB receive limit (sends are bounded only by the server's).
	conn, err := grpc.Dial(addr, grpc.WithInsecure(),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(32<<20), grpc.MaxCallSendMsgSize(32<<20)))
	if err != nil {
		return err
	}
	defer conn.Close()
	client := sessionsv1.NewSessionServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)

	created, err := client.CreateSession(ctx, &sessionsv1.CreateSessionRequest{DefaultModel: model})
	if err != nil {
		return fmt.Errorf("CreateSession: %w", err)
	}
	id := created.GetSession().GetId()
	fmt.Printf("[session %s, model %s]\n", id, model)

	done, err := converse(ctx, client, id)
	if err != nil {
		return err
	}
	fmt.Println("\n--- the conversation, as stored:")
	if err := printTranscript(ctx, client, id); err != nil {
		return err
	}
	if done.GetStoppedBy() != sessionsv1.StopReason_STOP_REASON_COMPLETED {
		return fmt.Errorf("the loop did not complete: %v", done)
	}
	return nil
}

// converse sends the prompt, prints the answer as it streams and answers each get_time call, until `done`.
func converse(ctx context.Context, client sessionsv1.SessionServiceClient, id string) (*sessionsv1.Done, error) {
	stream, err := client.Prompt(ctx, &sessionsv1.PromptRequest{
		SessionId: id,
		Parts:     []*sessionsv1.PromptPart{{Kind: &sessionsv1.PromptPart_Text{Text: "What time is it in UTC?"}}},
		ClientTools: []*sessionsv1.ClientTool{{
			Name:            "get_time",
			Description:     "Returns the current time in a timezone (only UTC here).",
			InputSchemaJson: getTimeSchema,
		}},
	})
	if err != nil {
		return nil, fmt.Errorf("Prompt: %w", err)
	}
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			return nil, errors.New("the stream ended without done")
		}
		if err != nil {
			return nil, fmt.Errorf("Prompt stream: %w", err)
		}
		switch e := resp.GetEvent().GetEvent().(type) {
		case *sessionsv1.SessionEvent_PartDelta:
			fmt.Print(e.PartDelta.GetDelta())
		case *sessionsv1.SessionEvent_ToolCallAwaiting:
			call := e.ToolCallAwaiting
			fmt.Printf("\n[tool call %s %s]\n", call.GetTool(), call.GetInputJson())
			output, isError := getTime(call.GetInputJson())
			_, err := client.SubmitToolResult(ctx, &sessionsv1.SubmitToolResultRequest{
				SessionId: id, CallId: call.GetCallId(), Output: output, IsError: isError,
			})
			if err != nil {
				return nil, fmt.Errorf("SubmitToolResult: %w", err)
			}
		case *sessionsv1.SessionEvent_Done:
			return e.Done, nil
		}
	}
}

// printTranscript prints one line per text part and tool call, every page of messages followed.
func printTranscript(ctx context.Context, client sessionsv1.SessionServiceClient, id string) error {
	token := ""
	for {
		page, err := client.ListMessages(ctx, &sessionsv1.ListMessagesRequest{SessionId: id, PageToken: token})
		if err != nil {
			return fmt.Errorf("ListMessages: %w", err)
		}
		for _, m := range page.GetMessages() {
			who := "assistant"
			if m.GetRole() == sessionsv1.Role_ROLE_USER {
				who = "user"
			}
			for _, p := range m.GetParts() {
				if text := p.GetText().GetText(); text != "" {
					fmt.Printf("%s: %s\n", who, text)
				} else if tool := p.GetTool(); tool != nil {
					state := tool.GetState()
					result := "error: " + state.GetError()
					if state.GetStatus() == sessionsv1.ToolState_STATUS_COMPLETED {
						result = state.GetOutput()
					}
					fmt.Printf("tool %s(%s) -> %s\n", tool.GetTool(), state.GetInputJson(), result)
				}
			}
		}
		if token = page.GetNextPageToken(); token == "" {
			return nil
		}
	}
}
