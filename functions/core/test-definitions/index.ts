/*
 * Test definitions, the front of the domain: the tests a tests file imports, their folders and steps,
 * and how callers read them (definitions.ts). A run starts from a copy of one.
 */

export {
  type ApplicationVersion,
  copyStep,
  type Folder,
  findTest,
  getTest,
  importTests,
  listTests,
  type StepElement,
} from './definitions.js';
export { rewriteStepElements, type StepElementChange } from './step-elements.js';
