package responses

import "flag"

var update = flag.Bool("update", false, "rewrite the golden files under testdata")
