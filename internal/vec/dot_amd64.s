#include "textflag.h"

// func dotBlocks(a, b []float32) float32
// a·b over the first len(a)&^15 elements: four 4-lane SSE sums (SSE2 is
// part of every amd64 CPU), added together at the end.
TEXT ·dotBlocks(SB), NOSPLIT, $0-52
	MOVQ a_base+0(FP), SI
	MOVQ a_len+8(FP), CX
	MOVQ b_base+24(FP), DI
	XORPS X0, X0
	XORPS X1, X1
	XORPS X2, X2
	XORPS X3, X3
	SHRQ $4, CX
	JZ   sum

loop:
	MOVUPS 0(SI), X4
	MOVUPS 16(SI), X5
	MOVUPS 32(SI), X6
	MOVUPS 48(SI), X7
	MOVUPS 0(DI), X8
	MOVUPS 16(DI), X9
	MOVUPS 32(DI), X10
	MOVUPS 48(DI), X11
	MULPS  X8, X4
	MULPS  X9, X5
	MULPS  X10, X6
	MULPS  X11, X7
	ADDPS  X4, X0
	ADDPS  X5, X1
	ADDPS  X6, X2
	ADDPS  X7, X3
	ADDQ   $64, SI
	ADDQ   $64, DI
	DECQ   CX
	JNZ    loop

sum:
	ADDPS  X1, X0
	ADDPS  X3, X2
	ADDPS  X2, X0
	MOVAPS X0, X1
	SHUFPS $0x4E, X1, X1
	ADDPS  X1, X0
	MOVAPS X0, X1
	SHUFPS $0xB1, X1, X1
	ADDPS  X1, X0
	MOVSS  X0, ret+48(FP)
	RET

// func dotsBlocks(a, bs, out []float32)
// out[j] = dotBlocks(a, bs[j·len(a):]) for each j < len(out); len(a) is a
// multiple of 16 and bs holds len(out)·len(a) elements. Rows go two at a
// time, each in its own four sums (X0-X3, X4-X7) as dotBlocks sums one,
// sharing the loads of a: the two chains of additions overlap.
TEXT ·dotsBlocks(SB), NOSPLIT, $0-72
	MOVQ a_base+0(FP), R8
	MOVQ a_len+8(FP), R9
	MOVQ bs_base+24(FP), DI
	MOVQ out_base+48(FP), R10
	MOVQ out_len+56(FP), R11
	MOVQ R9, R12
	SHLQ $2, R12 // bytes per row
	SHRQ $4, R9  // blocks per row
	TESTQ R9, R9
	JZ   zeros

pair:
	CMPQ R11, $2
	JLT  single
	MOVQ  R8, SI
	MOVQ  DI, DX
	ADDQ  R12, DX // the second row
	MOVQ  R9, CX
	XORPS X0, X0
	XORPS X1, X1
	XORPS X2, X2
	XORPS X3, X3
	XORPS X4, X4
	XORPS X5, X5
	XORPS X6, X6
	XORPS X7, X7

pairloop:
	MOVUPS 0(SI), X8
	MOVUPS 16(SI), X9
	MOVUPS 32(SI), X10
	MOVUPS 48(SI), X11
	MOVUPS 0(DI), X12
	MOVUPS 0(DX), X13
	MULPS  X8, X12
	MULPS  X8, X13
	ADDPS  X12, X0
	ADDPS  X13, X4
	MOVUPS 16(DI), X14
	MOVUPS 16(DX), X15
	MULPS  X9, X14
	MULPS  X9, X15
	ADDPS  X14, X1
	ADDPS  X15, X5
	MOVUPS 32(DI), X12
	MOVUPS 32(DX), X13
	MULPS  X10, X12
	MULPS  X10, X13
	ADDPS  X12, X2
	ADDPS  X13, X6
	MOVUPS 48(DI), X14
	MOVUPS 48(DX), X15
	MULPS  X11, X14
	MULPS  X11, X15
	ADDPS  X14, X3
	ADDPS  X15, X7
	ADDQ   $64, SI
	ADDQ   $64, DI
	ADDQ   $64, DX
	DECQ   CX
	JNZ    pairloop

	// Both rows' sums, reduced as dotBlocks reduces one.
	ADDPS  X1, X0
	ADDPS  X3, X2
	ADDPS  X2, X0
	MOVAPS X0, X1
	SHUFPS $0x4E, X1, X1
	ADDPS  X1, X0
	MOVAPS X0, X1
	SHUFPS $0xB1, X1, X1
	ADDPS  X1, X0
	MOVSS  X0, 0(R10)
	ADDPS  X5, X4
	ADDPS  X7, X6
	ADDPS  X6, X4
	MOVAPS X4, X5
	SHUFPS $0x4E, X5, X5
	ADDPS  X5, X4
	MOVAPS X4, X5
	SHUFPS $0xB1, X5, X5
	ADDPS  X5, X4
	MOVSS  X4, 4(R10)
	MOVQ   DX, DI // past the second row
	ADDQ   $8, R10
	SUBQ   $2, R11
	JMP    pair

single:
	TESTQ R11, R11
	JZ    done
	MOVQ  R8, SI
	MOVQ  R9, CX
	XORPS X0, X0
	XORPS X1, X1
	XORPS X2, X2
	XORPS X3, X3

singleloop:
	MOVUPS 0(SI), X4
	MOVUPS 16(SI), X5
	MOVUPS 32(SI), X6
	MOVUPS 48(SI), X7
	MOVUPS 0(DI), X8
	MOVUPS 16(DI), X9
	MOVUPS 32(DI), X10
	MOVUPS 48(DI), X11
	MULPS  X8, X4
	MULPS  X9, X5
	MULPS  X10, X6
	MULPS  X11, X7
	ADDPS  X4, X0
	ADDPS  X5, X1
	ADDPS  X6, X2
	ADDPS  X7, X3
	ADDQ   $64, SI
	ADDQ   $64, DI
	DECQ   CX
	JNZ    singleloop

	ADDPS  X1, X0
	ADDPS  X3, X2
	ADDPS  X2, X0
	MOVAPS X0, X1
	SHUFPS $0x4E, X1, X1
	ADDPS  X1, X0
	MOVAPS X0, X1
	SHUFPS $0xB1, X1, X1
	ADDPS  X1, X0
	MOVSS  X0, 0(R10)
	RET

zeros: // rows of no blocks: sums of nothing
	TESTQ R11, R11
	JZ    done
	MOVL  $0, 0(R10)
	ADDQ  $4, R10
	DECQ  R11
	JMP   zeros

done:
	RET
