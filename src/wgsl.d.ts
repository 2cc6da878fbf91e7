// WGSL sources are imported as strings (see the `wgsl` plugin in vite.config.ts).
declare module '*.wgsl' {
  const source: string;
  export default source;
}
