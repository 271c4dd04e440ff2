/* Call frame instructions that GCC's and glibc's CFI do not use, for comparing our CFA program
   interpreter with pyelftools and readelf (test_cfi_pyelftools.py). The code is never run: only
   its .eh_frame matters. The .cfi_escape bytes are DWARF 5 §6.4.2 instructions; x86-64 DWARF
   register numbers (psABI §3.6.2): 3 rbx, 6 rbp, 7 rsp, 12-15 r12-r15; data alignment -8. */
	.text
	.globl	cfi_synth
	.type	cfi_synth, @function
cfi_synth:
	.cfi_startproc
	pushq	%rbp
	.cfi_def_cfa_offset 16
	.cfi_offset %rbp, -16
	movq	%rsp, %rbp
	.cfi_def_cfa_register %rbp
	pushq	%rbx
	.cfi_escape 0x05, 0x03, 0x03		/* DW_CFA_offset_extended rbx, 3: cfa-24 */
	.cfi_remember_state
	nop
	.cfi_same_value %r12
	.cfi_undefined %r13
	.cfi_register %r14, %r15
	nop
	.cfi_escape 0x14, 0x0f, 0x04		/* DW_CFA_val_offset r15, 4: cfa-32 */
	.cfi_escape 0x15, 0x0c, 0x7e		/* DW_CFA_val_offset_sf r12, -2: cfa+16 */
	nop
	.cfi_escape 0x16, 0x0d, 0x02, 0x76, 0x10	/* DW_CFA_val_expression r13, DW_OP_breg6 16 */
	nop
	.cfi_restore_state
	nop
	.cfi_escape 0x06, 0x03			/* DW_CFA_restore_extended rbx */
	.cfi_restore %rbp
	nop
	.cfi_escape 0x13, 0x7d			/* DW_CFA_def_cfa_offset_sf -3: rbp+24 */
	nop
	.cfi_escape 0x12, 0x07, 0x7e		/* DW_CFA_def_cfa_sf rsp, -2: rsp+16 */
	.fill	70000, 1, 0x90			/* far enough for a DW_CFA_advance_loc4 */
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size	cfi_synth, .-cfi_synth
	.section .note.GNU-stack,"",@progbits
