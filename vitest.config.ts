import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: { projects: ['packages/*', 'examples/03-custom-store'] },
});
