package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// sectionName is what a folded section may be called: it becomes the
// markers <!-- bench:NAME:start --> and <!-- bench:NAME:end -->.
var sectionName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// fold is the `bench fold` subcommand: it puts the markdown another
// benchmark printed (the recall search benchmark, the token curve) into its
// own marked section of BENCHMARKS.md, replacing that section's earlier
// version and keeping everything else.
//
//	bench fold -out BENCHMARKS.md -section search search.md
func fold(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench fold", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "BENCHMARKS.md", "markdown file to update")
	name := fs.String("section", "", "section name (lower case letters, digits, dashes)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !sectionName.MatchString(*name) || *name == "overhead" || *name == "gobench" {
		return fmt.Errorf("fold: -section %q must be lower case letters, digits and dashes, and not one of bench's own sections", *name)
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("fold: want exactly one markdown file, got %d", fs.NArg())
	}
	body, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return fmt.Errorf("fold: %w", err)
	}
	text := strings.TrimSpace(string(body))
	if text == "" {
		return fmt.Errorf("fold: %s is empty", fs.Arg(0))
	}
	return updateFile(*out, foldSection(*name, text))
}

// foldSection wraps markdown in the markers of section name.
func foldSection(name, markdown string) string {
	return fmt.Sprintf("<!-- bench:%s:start -->\n%s\n<!-- bench:%s:end -->\n", name, strings.TrimSpace(markdown), name)
}
