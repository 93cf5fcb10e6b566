/** Migration files are imported as text (tsup `loader: { '.sql': 'text' }`, vitest plugin). */
declare module '*.sql' {
  const text: string;
  export default text;
}
