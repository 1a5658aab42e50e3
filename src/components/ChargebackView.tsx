/**
 * The admin view's chargeback: a month's hours and cost per team with its
 * totals row (`GET chargeback?month=`), and the same as a CSV download.
 */

import * as React from 'react';

import { chargebackLines, IChargebackClient, isMonth, monthOf } from '../usage';
import { useLoad, useOnScreen } from './hooks';
import { costColumn, HoursTable, RESOURCE_COLUMNS } from './HoursTable';

export function ChargebackView(props: {
  client: IChargebackClient;
}): JSX.Element {
  const { client } = props;
  const [month, setMonth] = React.useState(() => monthOf(Date.now()));
  const valid = isMonth(month);
  // Read once the section is first on screen (not for a closed panel).
  const ref = React.useRef<HTMLElement>(null);
  const onScreen = useOnScreen(ref);
  const report = useLoad(
    () =>
      valid
        ? client.chargeback(month)
        : Promise.reject(new Error('Choose a month (YYYY-MM).')),
    [client, month],
    onScreen
  );
  const shown = report.value?.month === month ? report.value : null;
  const currency = shown?.prices?.currency;
  const lines = shown ? chargebackLines(shown) : null;
  return (
    <section
      ref={ref}
      className="jp-QuotaSidebar-section jp-QuotaAdmin-chargeback"
      aria-labelledby="jp-QuotaAdmin-chargebackTitle"
      aria-busy={report.loading}
    >
      <h2 id="jp-QuotaAdmin-chargebackTitle">Chargeback</h2>
      <div className="jp-QuotaUsage-controls">
        <label htmlFor="jp-QuotaAdmin-month">
          Month{' '}
          <input
            id="jp-QuotaAdmin-month"
            className="jp-mod-styled"
            type="month"
            value={month}
            aria-invalid={!valid}
            onChange={e => setMonth(e.target.value)}
          />
        </label>
        {valid && (
          <a
            className="jp-mod-styled jp-QuotaButton jp-QuotaAdmin-csv"
            href={client.chargebackCsvUrl(month)}
            download={`chargeback-${month}.csv`}
          >
            Download CSV
          </a>
        )}
      </div>
      {report.error && (
        <p className="jp-QuotaSidebar-error" role="alert">
          {report.error}
        </p>
      )}
      {lines && shown && (
        <HoursTable
          rows={lines.rows}
          total={lines.total}
          label={`Chargeback for ${shown.month}`}
          keyTitle="Namespace"
          columns={[
            costColumn(currency ? `Cost (${currency})` : 'Cost'),
            ...RESOURCE_COLUMNS
          ]}
          empty={`Nothing used in ${shown.month}.`}
          className="jp-QuotaAdmin-chargebackTable"
        />
      )}
      {shown && !currency && (
        <p className="jp-QuotaSidebar-hint">
          No prices are configured (JupyterQuota.prices), so the chargeback
          counts hours only.
        </p>
      )}
    </section>
  );
}
