"""The simulated accelerator (issue 13): closed-form timing of its units (`timing`) and the
roofline `HardwareSpec` derived from an `AccelSpec` (`spec`)."""
