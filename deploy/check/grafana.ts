// Types the dashboards are checked against: Grafana's own schema (@grafana/schema), tightened so
// that `tsc --strict` rejects every key Grafana does not know. typed_literals.py writes each
// dashboard JSON as literals of these types; excess-property checks then fail on unknown keys.
import type * as common from "@grafana/schema";
import type * as heatmap from "@grafana/schema/dist/esm/raw/composable/heatmap/panelcfg/x/HeatmapPanelCfg_types.gen";
import type * as table from "@grafana/schema/dist/esm/raw/composable/table/panelcfg/x/TablePanelCfg_types.gen";
import type * as timeseries from "@grafana/schema/dist/esm/raw/composable/timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen";

/** A type as JSON carries it: TypeScript string enums become the strings they stand for (a JSON
 * file holds "table", never LegendDisplayMode.Table); every key stays checked. */
export type Wire<T> = T extends string
  ? `${T}`
  : T extends number | boolean | null | undefined
    ? T
    : T extends readonly (infer U)[]
      ? Wire<U>[]
      : T extends object
        ? { [K in keyof T]: Wire<T[K]> }
        : T;

/** Grafana's Prometheus query model (the prometheus plugin's dataquery schema). @grafana/schema
 * leaves panel targets as `Record<string, unknown>` and does not ship this type. */
export interface PrometheusQuery {
  refId: string;
  datasource: { type: "prometheus"; uid: string };
  editorMode?: "code" | "builder";
  expr: string;
  legendFormat?: string;
  format?: "time_series" | "table" | "heatmap";
  range?: boolean;
  instant?: boolean;
  interval?: string;
  hide?: boolean;
}

/** The veneer's FieldConfig intersects `custom` with `Record<string, unknown>`, which lets any key
 * through; here `custom` is exactly the panel plugin's field config. */
type FieldDefaults<Custom> = Omit<common.FieldConfig, "custom"> & { custom?: Custom };

/** A panel of plugin `Type` whose `options` and `fieldConfig.defaults.custom` are the plugin's own. */
type PanelOf<Type extends string, Options, Custom> = Wire<
  Omit<common.Panel, "type" | "options" | "fieldConfig" | "targets"> & {
    type: Type;
    options: Options;
    fieldConfig: Omit<common.FieldConfigSource, "defaults"> & { defaults: FieldDefaults<Custom> };
    targets: PrometheusQuery[];
  }
>;

export type TimeseriesPanel = PanelOf<"timeseries", timeseries.Options, timeseries.FieldConfig>;
export type HeatmapPanel = PanelOf<"heatmap", heatmap.Options, heatmap.FieldConfig>;
export type TablePanel = PanelOf<"table", table.Options, table.FieldConfig>;
export type Panel = TimeseriesPanel | HeatmapPanel | TablePanel;

/** A Prometheus annotation query as Grafana saves it: the AnnotationQuery of @grafana/schema
 * (which types only the built-in Grafana source's `target`) plus the Prometheus source's keys. */
export type PrometheusAnnotation = Wire<Omit<common.AnnotationQuery, "target">> & {
  expr: string;
  step?: string;
  titleFormat?: string;
  textFormat?: string;
  tagKeys?: string;
  useValueForTime?: boolean;
};

export type Dashboard = Wire<Omit<common.Dashboard, "panels" | "annotations">> & {
  annotations?: { list: (Wire<common.AnnotationQuery> | PrometheusAnnotation)[] };
  panels: Panel[];
};
