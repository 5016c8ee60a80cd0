package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/memgate/memgate/internal/identity"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

const usage = `usage: gateway [command]

commands:
  serve      run the gateway (default)
  worker     run only the capture worker
  migrate    apply the store's migrations and exit
  reindex    re-embed memory items made by another embedding model or dimension
             (resumable: interrupt and run again)
  mcp        serve the memory to a local MCP client over stdin/stdout
             (flags: -tenant NAME, default "default"; see README "MCP")
  healthcheck  exit 0 when the local gateway answers /healthz
  version    print the version
  hash-key   print sha256:<hex> of a gateway key, read from the argument or stdin,
             for the keys[].hash setting`

// run is the whole program: main only calls it, tests call it in-process.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 1 {
		cmd = args[1]
	}
	switch cmd {
	case "serve":
		return serve(ctx, getenv, stderr)
	case "worker":
		return worker(ctx, getenv, stderr)
	case "migrate":
		return migrate(ctx, getenv, stdout, stderr)
	case "reindex":
		return reindex(ctx, getenv, stdout, stderr)
	case "mcp":
		return mcpStdio(ctx, args[2:], getenv, stdin, stdout, stderr)
	case "healthcheck":
		return healthcheck(ctx, getenv)
	case "version":
		fmt.Fprintln(stdout, "memgate", buildVersion())
		return nil
	case "hash-key":
		return hashKey(args[2:], stdin, stdout)
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, usage)
		return nil
	}
	return fmt.Errorf("unknown command %q\n%s", cmd, usage)
}

// buildVersion is the -ldflags version, else the module version or VCS
// revision recorded in the binary.
func buildVersion() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" {
			return "devel-" + s.Value[:min(12, len(s.Value))]
		}
	}
	return "devel"
}

// hashKey prints the configuration hash of the key given as the argument or
// on the first line of stdin.
func hashKey(args []string, stdin io.Reader, stdout io.Writer) error {
	var key string
	switch len(args) {
	case 0:
		line, err := bufio.NewReader(stdin).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read key: %w", err)
		}
		key = strings.TrimRight(line, "\r\n")
	case 1:
		key = args[0]
	default:
		return errors.New("hash-key takes at most one argument")
	}
	if key == "" {
		return errors.New("hash-key: empty key")
	}
	fmt.Fprintln(stdout, identity.HashKey(key))
	return nil
}
