package storetest

import "testing"

// pairCase is a case of a suite run on two handles on one store, as two
// processes sharing it hold them.
type pairCase[S any] struct {
	name string
	run  func(t *testing.T, a, b S)
}

// runPairs runs each of cases as a subtest, on two handles open returns
// afresh for it.
func runPairs[S any](t *testing.T, open func(t *testing.T) (a, b S), cases []pairCase[S]) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			a, b := open(t)
			tt.run(t, a, b)
		})
	}
}
