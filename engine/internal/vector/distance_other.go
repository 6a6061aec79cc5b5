//go:build !amd64

package vector

const useAVX2 = false

func dotAVX2(a, b *float32, n int) float32  { panic("unreachable") }
func l2sqAVX2(a, b *float32, n int) float32 { panic("unreachable") }
