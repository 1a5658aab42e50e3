/**
 * The extension's icon: a gauge, drawn with JupyterLab's icon classes so that
 * it follows the theme.
 */

import { LabIcon } from '@jupyterlab/ui-components';

const QUOTA_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161">
    <path d="M12 4a10 10 0 0 0-10 10c0 2.1.65 4.05 1.76 5.66l1.64-1.15A8 8 0 1 1 20 14a7.96 7.96 0 0 1-1.4 4.51l1.64 1.15A10 10 0 0 0 12 4z"/>
    <path d="M13.4 15.4a2 2 0 1 1-2.8-2.8l5.66-4.24-2.86 7.04z"/>
    <rect x="11" y="6" width="2" height="3" rx="1"/>
  </g>
</svg>`;

export const quotaIcon = new LabIcon({
  name: 'jupyter-quota:quota',
  svgstr: QUOTA_SVG
});

/** The admin view's icon: the gauge with a pencil (the profiles are edited there). */
const QUOTA_ADMIN_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161">
    <g transform="translate(0 -1) scale(0.8)">
      <path d="M12 4a10 10 0 0 0-10 10c0 2.1.65 4.05 1.76 5.66l1.64-1.15A8 8 0 1 1 20 14a7.96 7.96 0 0 1-1.4 4.51l1.64 1.15A10 10 0 0 0 12 4z"/>
      <path d="M13.4 15.4a2 2 0 1 1-2.8-2.8l5.66-4.24-2.86 7.04z"/>
    </g>
    <path d="M14 20.5V23h2.5l6-6-2.5-2.5-6 6z"/>
  </g>
</svg>`;

export const quotaAdminIcon = new LabIcon({
  name: 'jupyter-quota:quota-admin',
  svgstr: QUOTA_ADMIN_SVG
});
