import { packageTestProject } from '../../vitest.shared.js';

export default packageTestProject();
