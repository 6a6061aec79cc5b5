package vector

import "golang.org/x/sys/cpu"

// useAVX2 selects the assembly kernels: AVX2 with fused multiply-add.
var useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

//go:noescape
func dotAVX2(a, b *float32, n int) float32

//go:noescape
func l2sqAVX2(a, b *float32, n int) float32
