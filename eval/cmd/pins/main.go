// Command pins measures pin detection (compaction.DetectPins) on labelled
// sets of sentences and prints precision and recall per language, as a
// Markdown table for BENCHMARKS.md (make eval runs it).
//
//	go run ./eval/cmd/pins [file.tsv ...]
//
// Without arguments it reads the sets under internal/compaction/testdata.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/memgate/memgate/internal/compaction"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "pins:", err)
		os.Exit(1)
	}
}

func run(files []string, out io.Writer) error {
	if len(files) == 0 {
		files = []string{"internal/compaction/testdata/standing.tsv", "internal/compaction/testdata/pins.tsv"}
	}
	fmt.Fprintln(out, "| set | language | sentences | precision | recall |")
	fmt.Fprintln(out, "|---|---|---|---|---|")
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		score, err := compaction.MeasurePins(f)
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
