export {
  createDashboard,
  type Dashboard,
  type DashboardOptions,
  type DashboardRequest,
} from './dashboard.js';
export type { AllowedHosts } from './hosts.js';
export { escapeHtml } from './html.js';
