/**
 * Unit tests of the frontend's pure modules and model, in plain Node:
 * `npm test`. TypeScript goes through ts-jest with tsconfig.test.json.
 */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/src'],
  testMatch: ['**/__tests__/**/*.spec.ts?(x)'],
  transform: {
    '^.+\\.tsx?$': ['ts-jest', { tsconfig: 'tsconfig.test.json' }]
  }
};
