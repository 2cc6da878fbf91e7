// The names of shaders/lib/subgroups.wgsl for devices without the `subgroups` feature: SUBGROUPS
// false, so the kernel takes its shared-memory path and never reaches these (one-lane stand-ins).

const SUBGROUPS: bool = false;

fn sg_size() -> u32 { return 1u; }
fn sg_index(lid: u32, size: u32) -> u32 { return lid; }
fn sg_run_sum(v: f32, lanes: u32, steps: u32, size: u32) -> f32 { return v; }
fn sg_run_max(v: f32, lanes: u32, steps: u32, size: u32) -> f32 { return v; }
