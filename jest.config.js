/**
 * Unit tests of the frontend's pure modules and model, in plain Node, and of
 * its React components in jsdom (`src/__tests__/components/`, each file says
 * `@jest-environment jsdom`) with Testing Library: `npm test`. TypeScript
 * goes through ts-jest with tsconfig.test.json.
 */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/src'],
  testMatch: ['**/__tests__/**/*.spec.ts?(x)'],
  setupFilesAfterEnv: ['@testing-library/jest-dom'],
  // A first render on a loaded 2-core CI machine can pass jest's 5 s default.
  testTimeout: 30000,
  transform: {
    '^.+\\.tsx?$': ['ts-jest', { tsconfig: 'tsconfig.test.json' }]
  }
};
