"""The simulated accelerator (issue 13): closed-form timing of its units (`timing`), a GEMM as a
kernel on a whole chip (`kernel`) and the roofline `HardwareSpec` derived from an `AccelSpec` (`spec`)."""
