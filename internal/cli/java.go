package cli

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
)

// This file reproduces the two Java behaviours that shape kafka-configs'
// output: how a double is printed and in which order a java.util.HashMap
// iterates.

// javaDouble formats v as Java's Double.toString does (JDK 19+, shortest
// repr): 1024.0, 0.5, 1.048576E7, 1.0E-4, NaN, Infinity.
func javaDouble(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "Infinity"
	case math.IsInf(v, -1):
		return "-Infinity"
	case v == 0:
		if math.Signbit(v) {
			return "-0.0"
		}
		return "0.0"
	}
	if a := math.Abs(v); a >= 1e-3 && a < 1e7 {
		s := strconv.FormatFloat(v, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	s := strconv.FormatFloat(v, 'e', -1, 64) // 1.048576e+07
	mant, exp, _ := strings.Cut(s, "e")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	e, _ := strconv.Atoi(exp)
	return mant + "E" + strconv.Itoa(e)
}

// javaStringHash is String.hashCode: s[0]*31^(n-1) + ... over UTF-16 units.
func javaStringHash(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}

// javaNullableHash is Objects.hashCode for a String that may be null.
func javaNullableHash(s *string) int32 {
	if s == nil {
		return 0
	}
	return javaStringHash(*s)
}

// javaHashMapOrder returns the indexes of keys (given with their hashCode,
// in insertion order) in the order a HashMap created with
// new HashMap<>(len(hashes)) iterates them: by bucket, and within a bucket
// in insertion order. (Trees of 8+ colliding keys are not modelled.)
func javaHashMapOrder(hashes []int32) []int {
	n := len(hashes)
	capacity := tableSizeFor(n)
	threshold := int(float32(capacity) * 0.75)
	for size := 1; size <= n; size++ {
		if size > threshold {
			capacity <<= 1
			threshold = int(float32(capacity) * 0.75)
		}
	}
	bucket := func(h int32) uint32 {
		u := uint32(h)
		return (u ^ u>>16) & uint32(capacity-1)
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		ba, bb := bucket(hashes[a]), bucket(hashes[b])
		switch {
		case ba < bb:
			return -1
		case ba > bb:
			return 1
		}
		return 0
	})
	return idx
}

// tableSizeFor is HashMap.tableSizeFor: the next power of two ≥ c, at least 1.
func tableSizeFor(c int) int {
	n := 1
	for n < c {
		n <<= 1
	}
	return n
}
