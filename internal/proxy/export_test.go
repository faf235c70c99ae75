package proxy

// BenchSessionProduce lets the external test package benchmark the session
// path with a policy from a package that imports proxy.
var BenchSessionProduce = benchSessionProduce
