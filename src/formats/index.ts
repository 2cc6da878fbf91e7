/** The formats layer: byte sources, GGUF and safetensors readers/writers, ggml block types. */
export * from './types';
export * from './source';
export * from './halfs';
export { dequantize, quantize, packScalesMinsK4, unpackScalesMinsK4 } from './quants';
export { readGGUF, type GGUFFile } from './gguf';
export { GGUFType, type GGUFValue, type GGUFMeta, type GGUFScalarType, type GGUFArrayItemType } from './gguf-common';
export { encodeGGUF, meta, concatChunks, type GGUFTensorInput, type GGUFWriteOptions } from './gguf-writer';
export {
  readSafetensors,
  encodeSafetensors,
  readSafetensorsIndex,
  type SafetensorsFile,
  type SafetensorsDType,
  type SafetensorsTensorInput,
  type SafetensorsIndex,
} from './safetensors';
export { writeChunks } from './node-write';
