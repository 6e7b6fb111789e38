// Lua scripts are imported as their source text: `import src from './lua/publish.lua' with { type: 'text' }` (Bun).
declare module '*.lua' {
  const source: string
  export default source
}
