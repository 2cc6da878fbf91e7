/**
 * The type grid, the plain types and the blocks of 32 (Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4): on every architecture, each
 * format of issues #15 and #16 that the main grid (engine.test.ts, engine-families.test.ts) does
 * not run, with the same rule in the short check (SHORT_STEPS: why short is enough). One file per
 * group of types, so that each compiles its types' kernels once and the files run side by side.
 */
import { describeEngineGrid, SHORT_STEPS, TYPE_GROUPS, typeGrid } from '../testing/engine-matrix';

describeEngineGrid(typeGrid(TYPE_GROUPS.blocks), 'f32', SHORT_STEPS);
