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
