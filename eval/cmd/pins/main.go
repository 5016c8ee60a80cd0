// Command pins measures pin detection (enrich.DetectPins) on labelled
// sets of sentences and prints precision and recall per language, as a
// Markdown table for BENCHMARKS.md (make eval runs it).
//
//	go run ./eval/cmd/pins [file.tsv ...]
//
// Without arguments it reads the sets under internal/engine/enrich/testdata.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/memgate/memgate/internal/engine/enrich"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "pins:", err)
		os.Exit(1)
	}
}

func run(files []string, out io.Writer) error {
	if len(files) == 0 {
		files = []string{"internal/engine/enrich/testdata/standing.tsv", "internal/engine/enrich/testdata/pins.tsv"}
	}
	fmt.Fprintln(out, "| set | language | sentences | precision | recall |")
	fmt.Fprintln(out, "|---|---|---|---|---|")
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		score, err := enrich.MeasurePins(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		for _, lang := range []string{"all", "en", "pt"} {
			c := score.ByLang[lang]
			fmt.Fprintf(out, "| %s | %s | %d | %.3f | %.3f |\n", name, lang, c.TP+c.FP+c.FN+c.TN, c.Precision(), c.Recall())
		}
	}
	return nil
}
