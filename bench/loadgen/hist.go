package loadgen

import (
	"math"
	"math/bits"
	"time"
)

// subBits sets the histogram's precision: every power of two is split into
// 2^subBits buckets, so a recorded value is off by less than 1/128 (0.8 %).
const subBits = 7

const (
	subCount   = 1 << subBits       // buckets per power of two
	exactLimit = 1 << (subBits + 1) // values below this get a bucket each
	numBuckets = exactLimit + (64-subBits-1)*subCount
)

// Histogram records durations in fixed memory (about 60 KB) with a relative
// error under 1 %, in the manner of an HDR histogram. The zero value is not
// usable; call NewHistogram. A Histogram is not safe for concurrent use: give
// each worker its own and Merge them.
type Histogram struct {
	counts   []uint64
	total    uint64
	sum      float64
	min, max int64
}

// NewHistogram returns an empty Histogram.
func NewHistogram() *Histogram {
	return &Histogram{counts: make([]uint64, numBuckets), min: math.MaxInt64}
}

// bucketOf returns the bucket index of v ≥ 0.
func bucketOf(v int64) int {
	u := uint64(v)
	if u < exactLimit {
		return int(u)
	}
	shift := bits.Len64(u) - (subBits + 1)
	top := u >> shift // in [subCount, 2*subCount)
	return exactLimit + (shift-1)*subCount + int(top-subCount)
}

// bucketMid returns a representative value (the midpoint) of bucket i.
func bucketMid(i int) int64 {
	if i < exactLimit {
		return int64(i)
	}
	j := i - exactLimit
	shift := j/subCount + 1
	top := uint64(j%subCount + subCount)
	lo := top << shift
	hi := (top+1)<<shift - 1
	return int64(lo + (hi-lo)/2)
}

// Record adds one observation. Negative durations count as zero.
func (h *Histogram) Record(d time.Duration) {
	v := max(int64(d), 0)
	h.counts[bucketOf(v)]++
	h.total++
	h.sum += float64(v)
	h.min = min(h.min, v)
	h.max = max(h.max, v)
}

// Merge adds every observation of o to h.
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.total += o.total
	h.sum += o.sum
	h.min = min(h.min, o.min)
	h.max = max(h.max, o.max)
}

// Count returns the number of observations.
func (h *Histogram) Count() uint64 { return h.total }

// Min returns the smallest observation (0 when empty).
func (h *Histogram) Min() time.Duration {
	if h.total == 0 {
		return 0
	}
	return time.Duration(h.min)
}

// Max returns the largest observation (exact).
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Mean returns the average observation (exact).
func (h *Histogram) Mean() time.Duration {
	if h.total == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.total))
}

// Quantile returns the value at quantile q in [0, 1] (0.5 is the median,
// 0.999 is p99.9), within 1 % of the true value and clamped to [Min, Max].
// It returns 0 for an empty histogram.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.total)))
	rank = min(max(rank, 1), h.total)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(min(max(bucketMid(i), h.min), h.max))
		}
	}
	return time.Duration(h.max)
}
