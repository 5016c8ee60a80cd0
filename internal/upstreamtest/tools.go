package upstreamtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
)

// NoToolConfigMessage is the 400 error message of RequireTools, AWS
// Bedrock's own.
const NoToolConfigMessage = "The toolConfig field must be defined when using the toolUse and toolResult content blocks."

// RequireTools serves h, except that a request whose messages carry the
// tool-call protocol but which declares no tools gets a 400 error body, as
// AWS Bedrock (and OpenAI-compatible gateways in front of it) answer: a
// chat message with tool_calls or function_call, or of role tool or
// function; an Anthropic content block tool_use or tool_result; a
// Responses input item function_call or function_call_output. A request
// declares tools with a non-empty tools (or chat's legacy functions)
// array.
func RequireTools(h http.Handler) http.Handler {
	return refuse(h, func(b []byte) error {
		if carriesTools(b) && !declaresTools(b) {
			return errors.New(NoToolConfigMessage)
		}
		return nil
	})
}

// refuse serves h, except that a request whose body check refuses gets a
// 400 error body with check's message.
func refuse(h http.Handler, check func(body []byte) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err == nil {
			r.Body = io.NopCloser(bytes.NewReader(b))
			err = check(b)
		}
		if err != nil {
			Error(http.StatusBadRequest, "invalid_request_error", "", err.Error()).ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// declaresTools reports whether body's tools or functions is a non-empty
// array.
func declaresTools(body []byte) bool {
	var req struct {
		Tools     []json.RawMessage `json:"tools"`
		Functions []json.RawMessage `json:"functions"`
	}
	_ = json.Unmarshal(body, &req)
	return len(req.Tools) > 0 || len(req.Functions) > 0
}

// carriesTools reports whether body's messages (chat, Anthropic) or input
// items (Responses) carry a tool call or a tool result.
func carriesTools(body []byte) bool {
	var req struct {
		Messages []struct {
			Role         string            `json:"role"`
			ToolCalls    []json.RawMessage `json:"tool_calls"`
			FunctionCall json.RawMessage   `json:"function_call"`
			Content      json.RawMessage   `json:"content"`
		} `json:"messages"`
		Input json.RawMessage `json:"input"`
	}
	_ = json.Unmarshal(body, &req)
	typed := func(raw json.RawMessage, types ...string) bool { // raw is an array of objects, one of a type given
		var items []struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(raw, &items)
		return slices.ContainsFunc(items, func(it struct {
			Type string `json:"type"`
		}) bool {
			return slices.Contains(types, it.Type)
		})
	}
	for _, m := range req.Messages {
		if m.Role == "tool" || m.Role == "function" || len(m.ToolCalls) > 0 ||
			len(m.FunctionCall) > 0 && string(m.FunctionCall) != "null" ||
			typed(m.Content, "tool_use", "tool_result") {
			return true
		}
	}
	return typed(req.Input, "function_call", "function_call_output")
}
