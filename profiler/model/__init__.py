"""The model: the ground floor every other part stands on. It imports nothing of ours.

`Trace` (columnar events, counters, flows, devices, metadata), its declared columns (`schema`),
`HardwareSpec` and its presets (`hardware`, `hardware_match`), redaction (`redact`) and the
input error every reader raises (`errors`).
"""
