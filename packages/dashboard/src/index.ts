export {
  createDashboard,
  type Dashboard,
  type DashboardOptions,
  type DashboardRequest,
} from './dashboard.js';
export { escapeHtml } from './html.js';
