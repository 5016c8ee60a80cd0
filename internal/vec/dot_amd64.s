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
// multiple of 16 and bs holds len(out)·len(a) elements.
TEXT ·dotsBlocks(SB), NOSPLIT, $0-72
	MOVQ a_base+0(FP), R8
	MOVQ a_len+8(FP), R9
	MOVQ bs_base+24(FP), DI
	MOVQ out_base+48(FP), R10
	MOVQ out_len+56(FP), R11
	SHRQ $4, R9
	TESTQ R11, R11
	JZ   done

row:
	MOVQ  R8, SI
	MOVQ  R9, CX
	XORPS X0, X0
	XORPS X1, X1
	XORPS X2, X2
	XORPS X3, X3
	TESTQ CX, CX
	JZ    rowsum

rowloop:
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
	JNZ    rowloop

rowsum:
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
	ADDQ   $4, R10
	DECQ   R11
	JNZ    row

done:
	RET
